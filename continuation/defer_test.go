package continuation_test

// Runtime defer records across yields. A frame whose deferred calls are
// not open-coded (a defer in a loop, more than eight defers, fmt's
// catchPanic) has a runtime record per pending call. The stack-copying
// backend moves those records with their frames; the portable backend
// leaves the frames where they are. On both, every yield here must
// suspend, and the deferred calls must run as in plain Go: by the frame's
// return, by a panic or runtime.Goexit crossing the frames, recovering or
// not, in order. Each body is run plainly and in a continuation resumed on
// fresh goroutines with a collection before every Run (gxCompare), and the
// logs compared. A yield that pins logs "pinned", which plain code never
// does.

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// dfYield yields in a continuation, and logs a yield that did not suspend.
func dfYield(e *gxEnv) {
	if e.inCont && !continuation.Yield(e.s) {
		e.logf("pinned")
	}
}

// dfLoop defers k calls in a loop (heap records), then calls f.
//
//go:noinline
func dfLoop(e *gxEnv, tag string, k int, f func()) {
	for i := range k {
		defer func() { e.logf("%s%d", tag, i) }()
	}
	f()
}

// dfNine has nine deferred calls, too many to open-code: stack records,
// whose closures are on the stack and capture local, a local of the frame.
// Each logs local as it is when it runs; f changes it between.
//
//go:noinline
func dfNine(e *gxEnv, tag string, f func(*int)) (sum int) {
	local := 1
	defer func() { sum += local; e.logf("%s1 %d", tag, local) }()
	defer func() { local++; e.logf("%s2 %d", tag, local) }()
	defer func() { local++; e.logf("%s3 %d", tag, local) }()
	defer func() { local++; e.logf("%s4 %d", tag, local) }()
	defer func() { local++; e.logf("%s5 %d", tag, local) }()
	defer func() { local++; e.logf("%s6 %d", tag, local) }()
	defer func() { local++; e.logf("%s7 %d", tag, local) }()
	defer func() { local++; e.logf("%s8 %d", tag, local) }()
	defer func() { local *= 10; e.logf("%s9 %d", tag, local) }()
	f(&local)
	return 0
}

// dfDeep recurses depth frames, each with a defer in a loop and every
// third a nine-defer frame too, then calls f at the bottom: enough frames
// that a resume thaws them record by record.
//
//go:noinline
func dfDeep(e *gxEnv, depth int, f func()) {
	if depth == 0 {
		f()
		return
	}
	for i := range 2 {
		defer func() { e.logf("deep%d.%d", depth, i) }()
	}
	if depth%3 == 0 {
		e.logf("nine%d sum %d", depth, dfNine(e, fmt.Sprint("n", depth, "."), func(p *int) {
			*p += depth
			dfDeep(e, depth-1, f)
		}))
		return
	}
	dfDeep(e, depth-1, f)
}

// dfGrow recurses n frames with a pad, to make the goroutine's stack grow
// under frames just thawed.
//
//go:noinline
func dfGrow(n int) int {
	var pad [256]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return dfGrow(n-1) + int(pad[n%len(pad)])
}

func TestDeferRecordsMove(t *testing.T) {
	cases := []struct {
		name string
		body func(e *gxEnv)
	}{
		{"Loop", func(e *gxEnv) {
			dfLoop(e, "a", 3, func() {
				dfYield(e)
				dfLoop(e, "b", 2, func() { dfYield(e); runtime.GC(); dfYield(e) })
				dfYield(e)
			})
		}},
		{"Nine", func(e *gxEnv) {
			e.logf("sum %d", dfNine(e, "x", func(p *int) {
				dfYield(e)
				*p += 5
				dfYield(e)
				dfGrow(200)
			}))
		}},
		{"NineNested", func(e *gxEnv) {
			e.logf("sum %d", dfNine(e, "x", func(p *int) {
				e.logf("inner %d", dfNine(e, "y", func(q *int) {
					dfYield(e)
					*p, *q = *p+1, *q+2
					dfYield(e)
				}))
			}))
		}},
		{"Deep", func(e *gxEnv) {
			dfDeep(e, 24, func() {
				for range 3 {
					dfYield(e)
					dfGrow(100)
				}
			})
		}},
		{"DeepYieldAfterReturn", func(e *gxEnv) {
			// Yields at every level on the way out: each capture moves
			// records of frames thawed since, above the barrier.
			dfDeep(e, 12, func() { dfYield(e) })
			dfLoop(e, "after", 2, func() { dfYield(e) })
		}},
		{"PanicRecovered", func(e *gxEnv) {
			dfLoop(e, "outer", 2, func() {
				func() {
					defer func() { e.logf("recovered %v", recover()) }()
					dfDeep(e, 10, func() {
						dfYield(e)
						panic("boom")
					})
				}()
				dfYield(e)
			})
		}},
		{"PanicRecoveredInNine", func(e *gxEnv) {
			e.logf("sum %d", dfNine(e, "x", func(p *int) {
				defer func() { e.logf("recovered %v", recover()); *p += 3 }()
				dfLoop(e, "in", 2, func() {
					dfYield(e)
					panic("boom")
				})
			}))
		}},
		{"PanicEscapes", func(e *gxEnv) {
			dfDeep(e, 9, func() {
				dfYield(e)
				dfGrow(50)
				panic("escapes")
			})
		}},
		{"PanicInDeferredCall", func(e *gxEnv) {
			defer func() { e.logf("recovered %v", recover()) }()
			dfLoop(e, "a", 2, func() {
				defer func() { panic("second") }()
				dfNine(e, "x", func(*int) {
					dfYield(e)
					panic("first")
				})
			})
		}},
		{"Goexit", func(e *gxEnv) {
			dfDeep(e, 9, func() {
				dfYield(e)
				runtime.Goexit()
			})
		}},
		{"GoexitPanicRecovered", func(e *gxEnv) {
			dfLoop(e, "a", 2, func() {
				defer func() { e.logf("recovered %v", recover()) }()
				dfLoop(e, "b", 2, func() {
					defer func() { panic("during goexit") }()
					dfYield(e)
					runtime.Goexit()
				})
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { gxCompare(t, tc.body) })
	}
}

// dfStringer, dfError and dfFormatter yield in the method fmt calls, from
// under fmt's catchPanic defer record; with boom set they panic after the
// yield, and catchPanic recovers the panic into the output.
type (
	dfStringer  struct{ e *gxEnv }
	dfError     struct{ e *gxEnv }
	dfFormatter struct {
		e    *gxEnv
		boom bool
	}
)

func (s dfStringer) String() string { dfYield(s.e); return "stringer" }
func (s dfError) Error() string     { dfYield(s.e); return "error" }
func (s dfFormatter) Format(f fmt.State, verb rune) {
	dfYield(s.e)
	if s.boom {
		panic("in Format")
	}
	fmt.Fprintf(f, "formatted %c", verb)
}

func TestDeferRecordsMoveThroughFmt(t *testing.T) {
	gxCompare(t, func(e *gxEnv) {
		e.logf("%s", fmt.Sprintf("%v|%s|%v|%d", dfStringer{e}, dfError{e}, dfFormatter{e, false}, dfFormatter{e, true}))
		e.logf("%v", fmt.Errorf("wrapped: %w", dfError{e}))
	})
}

// TestDeferRecordsMoveOneRunPerYield counts Runs: each yield through frames
// with defer records suspends, with no pin, and the body's result is the
// plain run's.
func TestDeferRecordsMoveOneRunPerYield(t *testing.T) {
	s := scope.New("defer-runs")
	var pinned []pinning.Reason
	e := &gxEnv{s: s, inCont: true}
	yields := 0
	c := continuation.New(s, func() {
		dfDeep(e, 15, func() {
			for range 5 {
				yields++
				dfYield(e)
			}
		})
	}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) { pinned = append(pinned, r) }))
	runs := 0
	for !c.IsDone() {
		runs++
		c.Run()
	}
	if runs != yields+1 || len(pinned) != 0 {
		t.Fatalf("%d Runs for %d yields; pinned %v", runs, yields, pinned)
	}
	plain := &gxEnv{}
	dfDeep(plain, 15, func() {})
	if !slices.Equal(e.log, plain.log) {
		t.Fatalf("log\n  %s\nwant\n  %s", strings.Join(e.log, "\n  "), strings.Join(plain.log, "\n  "))
	}
}

// TestDeferRecordsMoveAbandoned: a dropped continuation's frames with
// defer records unwind on abandonment, running those calls in order.
func TestDeferRecordsMoveAbandoned(t *testing.T) {
	s := scope.New("defer-abandon")
	log := &abandonLog{}
	done := make(chan struct{})
	runThenDrop(t, s, done, func() {
		defer close(done)
		for i := range 2 {
			defer log.note(fmt.Sprint("outer", i))
		}
		e := &gxEnv{s: s, inCont: true}
		dfNine(e, "x", func(*int) {
			for i := range 2 {
				defer log.note(fmt.Sprint("inner", i))
			}
			continuation.Yield(s)
			log.note("resumed")
		})
	})
	want := []string{"inner1", "inner0", "outer1", "outer0"}
	if got := log.get(); !slices.Equal(got, want) {
		t.Fatalf("deferred calls ran as %v, want %v", got, want)
	}
}

// dfPipe is one direction of an in-memory connection between two
// continuations: Read yields while it is empty.
type dfPipe struct {
	s   *scope.Scope
	buf bytes.Buffer
}

// dfConn reads from in, yielding to its continuation while in is empty,
// and writes to out.
type dfConn struct {
	in, out *dfPipe
	yields  *int
}

func (c dfConn) Read(p []byte) (int, error) {
	for c.in.buf.Len() == 0 {
		*c.yields++
		if !continuation.Yield(c.in.s) {
			return 0, errors.New("pinned")
		}
	}
	return c.in.buf.Read(p)
}

func (c dfConn) Write(p []byte) (int, error)      { return c.out.buf.Write(p) }
func (c dfConn) Close() error                     { return nil }
func (c dfConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c dfConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c dfConn) SetDeadline(time.Time) error      { return nil }
func (c dfConn) SetReadDeadline(time.Time) error  { return nil }
func (c dfConn) SetWriteDeadline(time.Time) error { return nil }

// dfRunPair runs two continuations in turn on this goroutine until both
// are done, and fails if either pins or they stop making progress.
func dfRunPair(t *testing.T, a, b *continuation.Continuation) {
	t.Helper()
	for i := 0; !a.IsDone() || !b.IsDone(); i++ {
		if i > 1000 {
			t.Fatal("the continuations did not finish")
		}
		if !a.IsDone() {
			a.Run()
		}
		if !b.IsDone() {
			b.Run()
		}
	}
}

// TestDeferRecordsMoveThroughHTTP: http.ReadRequest and
// (*http.Request).Write, whose deferred calls have runtime records, on a
// connection whose reads yield: a server reading two keep-alive requests
// and a client writing them, in two continuations on one goroutine.
func TestDeferRecordsMoveThroughHTTP(t *testing.T) {
	sc, ss := scope.New("client"), scope.New("server")
	toServer, toClient := &dfPipe{s: ss}, &dfPipe{s: sc}
	var yields int
	var got []string
	pinned := func(_ *continuation.Continuation, r pinning.Reason) { t.Errorf("pinned: %v", r) }
	server := continuation.New(ss, func() {
		br := bufio.NewReader(dfConn{toServer, toClient, &yields})
		for range 2 {
			req, err := http.ReadRequest(br)
			if err != nil {
				t.Errorf("ReadRequest: %v", err)
				return
			}
			body, _ := io.ReadAll(req.Body)
			got = append(got, req.Method+" "+req.URL.Path+" "+string(body))
		}
	}, continuation.WithOnPinned(pinned))
	client := continuation.New(sc, func() {
		for i, path := range []string{"/a", "/b"} {
			req, _ := http.NewRequest("POST", "http://x"+path, strings.NewReader(fmt.Sprint("body", i)))
			if err := req.Write(dfConn{toClient, toServer, &yields}); err != nil {
				t.Errorf("Write: %v", err)
			}
			continuation.Yield(sc) // the server reads it meanwhile
		}
	}, continuation.WithOnPinned(pinned))
	dfRunPair(t, server, client)
	if want := []string{"POST /a body0", "POST /b body1"}; !slices.Equal(got, want) || yields == 0 {
		t.Fatalf("server read %q with %d yields, want %q", got, yields, want)
	}
}

// TestDeferRecordsMoveThroughTLSHandshake: a TLS client and server, each a
// continuation, on one goroutine, over connections whose reads yield: the
// handshakes (crypto/tls.(*Conn).handshakeContext has a deferred call with
// a runtime record) and one message each way.
func TestDeferRecordsMoveThroughTLSHandshake(t *testing.T) {
	cert := dfCert(t)
	sc, ss := scope.New("tls client"), scope.New("tls server")
	toServer, toClient := &dfPipe{s: ss}, &dfPipe{s: sc}
	var yields int
	var got [2]string
	pinned := func(_ *continuation.Continuation, r pinning.Reason) { t.Errorf("pinned: %v", r) }
	server := continuation.New(ss, func() {
		c := tls.Server(dfConn{toServer, toClient, &yields}, &tls.Config{Certificates: []tls.Certificate{cert}})
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Errorf("server: %v", err)
			return
		}
		got[0] = string(buf)
		c.Write([]byte("world"))
	}, continuation.WithOnPinned(pinned))
	client := continuation.New(sc, func() {
		c := tls.Client(dfConn{toClient, toServer, &yields}, &tls.Config{InsecureSkipVerify: true})
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Errorf("client: %v", err)
			return
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Errorf("client: %v", err)
		}
		got[1] = string(buf)
	}, continuation.WithOnPinned(pinned))
	dfRunPair(t, client, server)
	if got != [2]string{"hello", "world"} || yields == 0 {
		t.Fatalf("got %q with %d yields", got, yields)
	}
}

// dfCert makes a self-signed certificate for the TLS test.
func dfCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"x"}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
