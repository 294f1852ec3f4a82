package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestShowcase(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 2_000); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"backend: ",
		`catalog/book/title     "The Art of Computer Programming"`,
		`"Types and Programming Languages"`,
		"2000 continuations suspended at once",
		"every result checked",
		`vthread 1 "mailbox" [parked`,
		".receive(...)\n",
		"a CPU profile of the worker",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
