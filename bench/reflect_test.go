package bench

import (
	"iter"
	"reflect"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// BenchmarkReflectRoundTrip measures a round trip whose yield lies under a
// reflect.Value.Call: the body calls a function through reflect, which
// yields once and returns, for every round trip. So each suspension freezes
// reflect's frames (reflect.Value.call, runtime.reflectcall and a
// runtime.callN trampoline) with the callee, and each resume thaws them.
// call=direct is the same body calling the function directly; the
// iter.Pull peer runs the same two bodies. ns/op is one round trip.
func BenchmarkReflectRoundTrip(b *testing.B) {
	for _, pr := range []struct {
		name string
		new  func(viaReflect bool) peer
	}{{"weft", newWeftCalling}, {"iter.Pull", newIterPullCalling}} {
		for _, via := range []bool{false, true} {
			call := "direct"
			if via {
				call = "reflect"
			}
			b.Run("impl="+pr.name+"/call="+call, func(b *testing.B) {
				b.ReportAllocs()
				p := pr.new(via)
				p.measure(b)
			})
		}
	}
}

// callingLoop returns a body step that calls f, which suspends once,
// directly or through reflect.Value.Call.
func callingLoop(viaReflect bool, f func()) func() {
	if !viaReflect {
		return f
	}
	v := reflect.ValueOf(f)
	return func() { v.Call(nil) }
}

// newWeftCalling: a weft continuation whose body loops on a call that
// yields, resumed with Run.
func newWeftCalling(viaReflect bool) peer {
	s := scope.New("bench")
	stop := false
	yields := 0
	step := callingLoop(viaReflect, func() {
		yields++
		if !continuation.Yield(s) {
			panic("bench: a yield under reflect.Value.Call pinned")
		}
	})
	c := continuation.New(s, func() {
		for !stop {
			step()
		}
	})
	c.Run()
	return weftPeer(c, &stop, &yields)
}

// newIterPullCalling: iter.Pull over a sequence whose body loops on a call
// that yields, resumed with next.
func newIterPullCalling(viaReflect bool) peer {
	yields := 0
	seq := func(yield func(int) bool) {
		more := true
		step := callingLoop(viaReflect, func() {
			yields++
			more = yield(yields)
		})
		for more {
			step()
		}
	}
	next, stop := iter.Pull(iter.Seq[int](seq))
	next()
	return nextPeer(next, stop, &yields)
}

// TestReflectRoundTripPeers: each peer suspends once per round trip, and
// the weft peer's yields under reflect.Value.Call suspend rather than pin.
func TestReflectRoundTripPeers(t *testing.T) {
	for _, via := range []bool{false, true} {
		for _, p := range []peer{newWeftCalling(via), newIterPullCalling(via)} {
			p.run(10)
			if got := p.close(); got != 11 {
				t.Errorf("viaReflect=%v: body suspended %d times, want 11", via, got)
			}
		}
	}
}
