package weft

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/scope"
)

// fillNonZero sets every field of v, recursively and unexported ones
// included, to a value other than its zero value, so that a test can tell
// which fields a function clears. It fails on a kind it does not know, so
// that a field of a new kind gets a value here rather than going unchecked.
func fillNonZero(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if !v.CanSet() {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillNonZero(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Array:
		for i := range v.Len() {
			fillNonZero(t, v.Index(i), path)
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.UnsafePointer:
		v.SetPointer(unsafe.Pointer(new(int)))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { return nil }))
	case reflect.Interface:
		var x any = errors.New("set")
		if !reflect.TypeOf(x).AssignableTo(v.Type()) {
			t.Fatalf("fillNonZero: %s: no value for interface type %v", path, v.Type())
		}
		v.Set(reflect.ValueOf(x))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Chan:
		v.Set(reflect.MakeChan(v.Type(), 0))
	case reflect.String:
		v.SetString("set")
	default:
		t.Fatalf("fillNonZero: %s: kind %v not handled", path, v.Kind())
	}
}

// nonZeroFields returns the paths of the leaf fields of v that are not
// zero, but for those whose path (such as ".chunk.Link.Mem") is in keep.
func nonZeroFields(v reflect.Value, path string, keep map[string]bool) []string {
	if keep[path] {
		return nil
	}
	if v.Kind() == reflect.Struct {
		var out []string
		for i := range v.NumField() {
			out = append(out, nonZeroFields(v.Field(i), path+"."+v.Type().Field(i).Name, keep)...)
		}
		return out
	}
	if !v.IsZero() {
		return []string{path}
	}
	return nil
}

// TestResetClearsHead checks that Reset starts every field of the record's
// head afresh but the scope it is given and what it keeps (reused, counted):
// Reset clears them one by one, and a field added to contHead and not to
// Reset fails here.
func TestResetClearsHead(t *testing.T) {
	for _, counted := range []bool{false, true} {
		s := scope.New("clear")
		var c *Cont
		if counted {
			c = NewCont(s, func() {})
		} else {
			c = NewUncountedCont(s, func() {})
		}
		fillNonZero(t, reflect.ValueOf(&c.contHead).Elem(), "")
		c.counted = counted // the counters are there or not: keep it true
		c.state.Store(int32(stDone))
		s2 := scope.New("clear 2")
		body := func() {}
		c.Reset(s2, body)
		keep := map[string]bool{".scope": true, ".reused": true, ".counted": true}
		if bad := nonZeroFields(reflect.ValueOf(&c.contHead).Elem(), "", keep); len(bad) > 0 {
			t.Errorf("counted=%v: Reset left %s set", counted, strings.Join(bad, ", "))
		}
		if c.scope != s2 || !c.reused || c.counted != counted {
			t.Errorf("counted=%v: after Reset: scope %v, reused %v, counted %v", counted, c.scope, c.reused, c.counted)
		}
		if reflect.ValueOf(c.stack.body).Pointer() != reflect.ValueOf(body).Pointer() {
			t.Errorf("counted=%v: Reset did not set the body", counted)
		}
	}
}
