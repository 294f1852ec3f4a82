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
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
