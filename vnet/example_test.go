//go:build linux

package vnet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// An echo server with a virtual thread per connection, and a client, all
// written in blocking style: io.Copy and bufio park the virtual threads,
// not their carriers.
func Example() {
	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s.Go(func(ctx context.Context) error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return nil // the listener is closed
			}
			s.Go(func(ctx context.Context) error {
				defer c.Close()
				_, err := io.Copy(c, c) // splice(2), until the client's CloseWrite
				c.(*vnet.Conn).CloseWrite()
				return err
			})
		}
	})

	client, _ := s.Go(func(ctx context.Context) error {
		c, err := vnet.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		go func() {
			// Writing from a plain goroutine works too: it blocks.
			io.Copy(c, strings.NewReader("hello\nvirtual\nthreads\n"))
			c.CloseWrite()
		}()
		lines := bufio.NewScanner(c)
		for lines.Scan() {
			fmt.Println("echo:", lines.Text())
		}
		return lines.Err()
	})
	if err := client.Join(); err != nil {
		fmt.Println(err)
	}
	ln.Close()
	// Output:
	// echo: hello
	// echo: virtual
	// echo: threads
}
