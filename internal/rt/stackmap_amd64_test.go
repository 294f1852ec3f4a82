package rt

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
)

type smNode struct {
	v    int
	next *smNode
}

// smResult is what smProbe finds in smHolder's frame.
type smResult struct {
	live    map[uintptr]bool // values of the words the stack map marks live
	objects []StackObject
	varp    uintptr
	argp    uintptr
	fn      Func
	err     error
}

var smArrAddr uintptr // where smFill found smHolder's array

//go:noinline
func smFill(a *[3]*smNode, n *smNode) {
	a[0], a[1], a[2] = n, n, nil
	smArrAddr = uintptr(unsafe.Pointer(a))
}

//go:noinline
func smUse(p *smNode, s string, local *smNode, a [3]*smNode) int {
	return p.v + len(s) + local.v + a[0].v
}

// smHolder keeps p, s and local live across its call to smProbe, and has
// an address-taken array (a stack object) that holds pointers.
//
//go:noinline
func smHolder(p *smNode, s string, res *smResult) int {
	local := &smNode{v: 7, next: p}
	var arr [3]*smNode
	smFill(&arr, local)
	smProbe(res)
	return smUse(p, s, local, arr)
}

// smProbe finds its caller's frame and reads it through the stack map.
//
//go:noinline
func smProbe(res *smResult) {
	pc, sp := arch.CallerPCSP()
	holder := FrameAt(pc, sp).Caller()
	m, err := holder.StackMap()
	res.fn, res.err, res.objects = holder.Fn, err, m.Objects
	res.varp, res.argp = uintptr(holder.VarP()), uintptr(holder.ArgP())
	res.live = map[uintptr]bool{}
	for i := int32(0); i < m.Locals.N; i++ {
		if m.Locals.Ptr(i) {
			w := unsafe.Add(holder.VarP(), -int(m.Locals.N-i)*8)
			res.live[*(*uintptr)(w)] = true
		}
	}
	for i := int32(0); i < m.Args.N; i++ {
		if m.Args.Ptr(i) {
			res.live[*(*uintptr)(unsafe.Add(holder.ArgP(), int(i)*8))] = true
		}
	}
}

// The pointers a frame keeps live across a call must be in words its
// stack map marks live, and its address-taken array must be described by a
// stack object record at the right place with the right pointer mask.
func TestStackMapOfLiveFrame(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	// smFill records the array's address as a plain number, which a stack
	// move would make stale: keep the stack still (pre-grown, no GC).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	growStack(64 << 10)
	p := &smNode{v: 1}
	s := fmt.Sprint("heap string ", 42)
	var res smResult
	if got := smHolder(p, s, &res); got != 1+len(s)+7+7 {
		t.Fatalf("smHolder = %d", got)
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if !strings.HasSuffix(res.fn.Name(), "/internal/rt.smHolder") {
		t.Fatalf("probe's caller is %s", res.fn.Name())
	}
	for name, v := range map[string]uintptr{
		"p":        uintptr(unsafe.Pointer(p)),
		"s's data": uintptr(unsafe.Pointer(unsafe.StringData(s))),
	} {
		if !res.live[v] {
			t.Errorf("%s (%#x) is live across the call but in no live word of the frame", name, v)
		}
	}
	var arr *StackObject
	for i := range res.objects {
		o := &res.objects[i]
		base := res.argp
		if o.Off < 0 {
			base = res.varp
		}
		if base+uintptr(int64(o.Off)) == smArrAddr {
			arr = o
		}
	}
	if arr == nil {
		t.Fatalf("no stack object at the array's address %#x; objects: %+v (varp %#x)", smArrAddr, res.objects, res.varp)
	}
	if arr.Size != 24 || arr.PtrBytes != 24 {
		t.Fatalf("array object: size %d, pointer bytes %d; want 24, 24", arr.Size, arr.PtrBytes)
	}
	mask := arr.PtrMask(res.fn)
	if mask.N != 3 || !mask.Ptr(0) || !mask.Ptr(1) || !mask.Ptr(2) {
		t.Fatalf("array object's pointer mask: %d words, bits %v %v %v", mask.N, mask.Ptr(0), mask.Ptr(1), mask.Ptr(2))
	}
}

func TestStackMapErrors(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	// Assembly functions have no locals pointer maps: asking for the map of
	// a frame with locals must fail with ErrNoStackMap, never invent one.
	self := FindFunc(funcPCOf(TestStackMapErrors))
	asm, refused := 0, 0
	for i := 0; i < len(self.datap.ftab)-1; i++ {
		f := FindFunc(self.datap.textAddr(self.datap.ftab[i].entryoff))
		if !f.Valid() || f.Flag()&FlagAsm == 0 {
			continue
		}
		asm++
		if f.FuncData(FUNCDATALocalsPointerMaps) != nil {
			continue
		}
		_, err := f.StackMapAt(f.Entry(), 64)
		if !errors.Is(err, ErrNoStackMap) {
			t.Fatalf("%s: StackMapAt with 64 bytes of locals: %v, want ErrNoStackMap", f.Name(), err)
		}
		refused++
	}
	if asm < 10 || refused == 0 {
		t.Fatalf("found %d assembly functions, %d without locals maps", asm, refused)
	}
	t.Logf("%d assembly functions, %d refused", asm, refused)
}
