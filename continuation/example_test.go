package continuation_test

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

func ExampleNew() {
	s := scope.New("gen")
	c := continuation.New(s, func() {
		for i := 0; i < 3; i++ {
			fmt.Println("body: step", i)
			continuation.Yield(s)
		}
		fmt.Println("body: done")
	})
	for !c.IsDone() {
		c.Run()
		fmt.Println("Run returned; done:", c.IsDone())
	}
	fmt.Printf("%+v\n", c.Stats().Runs)
	// Output:
	// body: step 0
	// Run returned; done: false
	// body: step 1
	// Run returned; done: false
	// body: step 2
	// Run returned; done: false
	// body: done
	// Run returned; done: true
	// 4
}

// A yield to an enclosing scope suspends the inner continuation with the
// outer one: the outer Run returns while the inner Run is still in progress,
// and resuming the outer continuation resumes the inner one where it was.
func ExampleYield_nested() {
	outerScope, innerScope := scope.New("outer"), scope.New("inner")
	inner := continuation.New(innerScope, func() {
		fmt.Println("inner: yield to inner")
		continuation.Yield(innerScope)
		fmt.Println("inner: yield to outer")
		continuation.Yield(outerScope)
		fmt.Println("inner: done")
	})
	outer := continuation.New(outerScope, func() {
		inner.Run()
		fmt.Println("outer: inner.Run returned")
		inner.Run()
		fmt.Println("outer: inner.Run returned again, inner done:", inner.IsDone())
	})
	outer.Run()
	fmt.Println("main: outer.Run returned, outer done:", outer.IsDone())
	outer.Run()
	fmt.Println("main: outer.Run returned, outer done:", outer.IsDone())
	// Output:
	// inner: yield to inner
	// outer: inner.Run returned
	// inner: yield to outer
	// main: outer.Run returned, outer done: false
	// inner: done
	// outer: inner.Run returned again, inner done: true
	// main: outer.Run returned, outer done: true
}

//go:noinline
func scanToken(s *scope.Scope) { continuation.Yield(s) }

//go:noinline
func parseList(s *scope.Scope) { scanToken(s) }

func ExampleContinuation_StackTrace() {
	s := scope.New("parser")
	c := continuation.New(s, func() { parseList(s) })
	c.Run()
	for _, f := range c.StackTrace() {
		// Print the function name without its package path.
		fmt.Println(f.Function[strings.LastIndex(f.Function, "/")+1:])
	}
	c.Run()
	fmt.Println("after the body returns:", c.StackTrace())
	// Output:
	// continuation_test.scanToken
	// continuation_test.parseList
	// continuation_test.ExampleContinuation_StackTrace.func1
	// after the body returns: []
}

func ExampleCurrent() {
	s := scope.New("current")
	var c *continuation.Continuation
	c = continuation.New(s, func() {
		fmt.Println("in the body:", continuation.Current(s) == c)
	})
	fmt.Println("before Run:", continuation.Current(s) == nil)
	c.Run()
	// Output:
	// before Run: true
	// in the body: true
}

// A deferred call that recovers a panic from a continuation's body learns
// where it began from PanicStack when its own stack no longer shows it
// (on the portable backend, where the body ran on another goroutine), and
// from its own stack otherwise.
func ExampleContinuation_PanicStack() {
	s := scope.New("explode")
	c := continuation.New(s, func() {
		continuation.Yield(s)
		explode()
	})
	func() {
		defer func() {
			r := recover()
			stack := c.PanicStack(r)
			if stack == nil {
				stack = debug.Stack()
			}
			fmt.Println("recovered:", r)
			fmt.Println("the stack names explode:", strings.Contains(string(stack), "continuation_test.explode("))
		}()
		for {
			c.Run()
		}
	}()
	fmt.Println("done:", c.IsDone())
	// Output:
	// recovered: boom
	// the stack names explode: true
	// done: true
}

//go:noinline
func explode() { panic("boom") }
