// Package target reads what the tracer needs from a Go executable that uses
// weft: the entry of each probed function and the offsets of its return
// instructions, the offset of the goroutine word where weft keeps the
// mounted continuation, the Go and weft versions, and a symbolizer for the
// program counters that the probes report.
//
// It reads the ELF symbol table, or the Go line table (.gopclntab) of a
// binary whose symbols were stripped, the build information, and DWARF
// where present. It does not run the binary.
package target

import (
	"debug/buildinfo"
	"debug/dwarf"
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"os"
	"strings"
)

// WeftModule is the module path of weft.
const WeftModule = "github.com/weftrt/weft"

// ErrUnsupported is wrapped by the errors of Open for a file the tracer
// cannot trace: not a Go linux/amd64 executable, one that does not use
// weft, or one whose layouts it does not know.
var ErrUnsupported = errors.New("cannot trace this binary")

// Binary is a Go executable that uses weft, read for tracing.
type Binary struct {
	Path        string
	GoVersion   string // the toolchain that built it, as "go1.26.8"
	WeftVersion string // weft's module version, or "(devel)" for a local tree
	// Stripped reports that the ELF symbol table is absent: functions are
	// found from the Go line table instead.
	Stripped bool
	// GWordOffset is the offset in runtime.g of the word that holds the
	// mounted continuation's record (weft's internal/gls), and
	// GWordSource says where it came from: "DWARF" or "table".
	GWordOffset uint64
	GWordSource string

	elf   *elf.File
	text  *elf.Section
	funcs map[string]fn
	tab   *gosym.Table
}

type fn struct{ addr, end uint64 }

// gWordOffsets is runtime.g.racectx's offset per Go release, for binaries
// without DWARF. It must match internal/gls/word_go1*.go of weft.
var gWordOffsets = map[string]uint64{
	"go1.25": 304,
	"go1.26": 312,
	"go1.27": 312,
}

// Open reads the executable at path. The file stays open until Close.
func Open(path string) (*Binary, error) {
	// An error opening the file (not permitted, say) is not about its
	// contents.
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: no Go build information (%v)", path, ErrUnsupported, err)
	}
	b := &Binary{Path: path, GoVersion: bi.GoVersion}
	switch {
	case bi.Main.Path == WeftModule:
		b.WeftVersion = bi.Main.Version
	default:
		for _, d := range bi.Deps {
			if d.Path == WeftModule {
				b.WeftVersion = d.Version
				if d.Replace != nil {
					b.WeftVersion = d.Version + " => " + d.Replace.Path
				}
			}
		}
	}
	if b.WeftVersion == "" {
		return nil, fmt.Errorf("%s: %w: it does not use %s", path, ErrUnsupported, WeftModule)
	}
	for _, s := range bi.Settings {
		if (s.Key == "GOOS" && s.Value != "linux") || (s.Key == "GOARCH" && s.Value != "amd64") {
			return nil, fmt.Errorf("%s: %w: built for %s=%s; the tracer reads linux/amd64 binaries", path, ErrUnsupported, s.Key, s.Value)
		}
		if s.Key == "-race" && s.Value == "true" {
			return nil, fmt.Errorf("%s: %w: built with -race, where weft runs its portable backend, which these probes do not cover", path, ErrUnsupported)
		}
	}
	ef, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrUnsupported, err)
	}
	b.elf = ef
	if err := b.read(); err != nil {
		ef.Close()
		return nil, err
	}
	return b, nil
}

// Close closes the file.
func (b *Binary) Close() error { return b.elf.Close() }

func (b *Binary) read() error {
	f := b.elf
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("%s: %w: machine %v, not x86-64", b.Path, ErrUnsupported, f.Machine)
	}
	if f.Type != elf.ET_EXEC {
		// The probes report run-time addresses, which equal the file's
		// only in a position-dependent executable.
		return fmt.Errorf("%s: %w: a position-independent executable (%v); build it with the default -buildmode=exe", b.Path, ErrUnsupported, f.Type)
	}
	b.text = f.Section(".text")
	pcln := f.Section(".gopclntab")
	if b.text == nil || pcln == nil {
		return fmt.Errorf("%s: %w: no .text or .gopclntab section", b.Path, ErrUnsupported)
	}
	data, err := pcln.Data()
	if err != nil {
		return fmt.Errorf("%s: %w: reading .gopclntab: %v", b.Path, ErrUnsupported, err)
	}
	// Since Go 1.18 the line table records the text start itself.
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, b.text.Addr))
	if err != nil {
		return fmt.Errorf("%s: %w: reading .gopclntab: %v", b.Path, ErrUnsupported, err)
	}
	b.tab = tab
	b.funcs = make(map[string]fn)
	syms, err := f.Symbols()
	if err == nil && len(syms) > 0 {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				b.funcs[s.Name] = fn{s.Value, s.Value + s.Size}
			}
		}
	} else {
		b.Stripped = true
		for _, f := range tab.Funcs {
			b.funcs[f.Name] = fn{f.Entry, f.End}
		}
	}
	if off, ok := b.dwarfGWord(); ok {
		b.GWordOffset, b.GWordSource = off, "DWARF"
		return nil
	}
	rel := release(b.GoVersion)
	off, ok := gWordOffsets[rel]
	if !ok {
		return fmt.Errorf("%s: %w: built by %s, without DWARF, and the tracer knows runtime.g's layout of %s only",
			b.Path, ErrUnsupported, b.GoVersion, knownReleases())
	}
	b.GWordOffset, b.GWordSource = off, "table"
	return nil
}

// release returns the Go release of a toolchain version: go1.26 of
// go1.26.8 or go1.26rc1.
func release(v string) string {
	v = strings.TrimPrefix(v, "go")
	if i := strings.IndexAny(v, " -+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return "go" + v
	}
	minor := parts[1]
	if i := strings.IndexAny(minor, "rcbeta"); i > 0 {
		minor = minor[:i]
	}
	return "go" + parts[0] + "." + minor
}

func knownReleases() string {
	return "go1.25, go1.26 and go1.27"
}

// dwarfGWord finds runtime.g.racectx in the binary's DWARF.
func (b *Binary) dwarfGWord() (uint64, bool) {
	d, err := b.elf.DWARF()
	if err != nil {
		return 0, false
	}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return 0, false
		}
		if e.Tag != dwarf.TagStructType {
			if e.Children && e.Tag != dwarf.TagCompileUnit {
				r.SkipChildren()
			}
			continue
		}
		if name, _ := e.Val(dwarf.AttrName).(string); name != "runtime.g" {
			r.SkipChildren()
			continue
		}
		t, err := d.Type(e.Offset)
		if err != nil {
			return 0, false
		}
		st, ok := t.(*dwarf.StructType)
		if !ok {
			return 0, false
		}
		for _, f := range st.Field {
			if f.Name == "racectx" {
				return uint64(f.ByteOffset), true
			}
		}
		return 0, false
	}
}

// Func returns the entry address and the end of the function named name.
// An assembly function's ELF symbol has an ABI suffix (".abi0") that its
// line-table name lacks; either spelling finds it.
func (b *Binary) Func(name string) (entry, end uint64, ok bool) {
	f, ok := b.lookup(name)
	return f.addr, f.end, ok
}

func (b *Binary) lookup(name string) (fn, bool) {
	if f, ok := b.funcs[name]; ok {
		return f, true
	}
	if base, cut := strings.CutSuffix(name, ".abi0"); cut {
		f, ok := b.funcs[base]
		return f, ok
	}
	f, ok := b.funcs[name+".abi0"]
	return f, ok
}

// Code returns the machine code of the function named name.
func (b *Binary) Code(name string) (entry uint64, code []byte, err error) {
	f, ok := b.lookup(name)
	if !ok {
		return 0, nil, fmt.Errorf("%s: no function %s", b.Path, name)
	}
	if f.addr < b.text.Addr || f.end > b.text.Addr+b.text.Size || f.end <= f.addr {
		return 0, nil, fmt.Errorf("%s: function %s lies outside .text", b.Path, name)
	}
	code = make([]byte, f.end-f.addr)
	if _, err := b.text.ReadAt(code, int64(f.addr-b.text.Addr)); err != nil {
		return 0, nil, fmt.Errorf("%s: reading %s: %w", b.Path, name, err)
	}
	return f.addr, code, nil
}

// FileOffset converts a virtual address in the binary's text to the file
// offset that uprobes are attached at.
func (b *Binary) FileOffset(addr uint64) (uint64, error) {
	for _, p := range b.elf.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr < p.Vaddr+p.Memsz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("%s: address %#x is in no executable segment", b.Path, addr)
}

// Frame is a symbolized program counter.
type Frame struct {
	Function string
	File     string
	Line     int
	Entry    uint64
}

// Symbolize returns the function, file and line of pc, a return address or
// an instruction address in the binary (zero Frame if unknown). For a
// return address, pass pc-1 to get the line of the call.
func (b *Binary) Symbolize(pc uint64) Frame {
	file, line, f := b.tab.PCToLine(pc)
	if f == nil {
		return Frame{}
	}
	return Frame{Function: f.Name, File: file, Line: line, Entry: f.Entry}
}

// TextRange returns the addresses of the executable text.
func (b *Binary) TextRange() (start, limit uint64) {
	return b.text.Addr, b.text.Addr + b.text.Size
}
