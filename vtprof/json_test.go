package vtprof

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// validate checks v, decoded JSON, against schema, a JSON Schema using
// the keywords threaddump.schema.json uses: type (a name or a list of
// names), enum, required, properties, additionalProperties, items and $ref
// to "#/$defs/NAME". It returns the problems it finds, each with its path.
func validate(root, schema map[string]any, v any, path string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		if !found {
			return []string{path + ": unsupported $ref " + ref}
		}
		def, _ := root["$defs"].(map[string]any)[name].(map[string]any)
		if def == nil {
			return []string{path + ": no $defs/" + name}
		}
		return validate(root, def, v, path)
	}
	var errs []string
	if typ, ok := schema["type"]; ok {
		var names []string
		switch t := typ.(type) {
		case string:
			names = []string{t}
		case []any:
			for _, n := range t {
				names = append(names, n.(string))
			}
		}
		if !slices.ContainsFunc(names, func(n string) bool { return isType(v, n) }) {
			return []string{fmt.Sprintf("%s: %T is not %v", path, v, names)}
		}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, v) {
		errs = append(errs, fmt.Sprintf("%s: %v not in %v", path, v, enum))
	}
	if obj, ok := v.(map[string]any); ok {
		for _, r := range asList(schema["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				errs = append(errs, path+": missing "+r.(string))
			}
		}
		props, _ := schema["properties"].(map[string]any)
		for k, val := range obj {
			if p, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(root, p, val, path+"."+k)...)
			} else if ap, ok := schema["additionalProperties"].(map[string]any); ok {
				errs = append(errs, validate(root, ap, val, path+"."+k)...)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range arr {
				errs = append(errs, validate(root, items, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// isType reports whether v, decoded JSON, has the JSON Schema type name.
func isType(v any, name string) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "null":
		return v == nil
	}
	return false
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	var schema map[string]any
	if err := json.Unmarshal(ThreadDumpSchema, &schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

func TestSchemaEmbedded(t *testing.T) {
	b, err := os.ReadFile("threaddump.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, ThreadDumpSchema) {
		t.Error("ThreadDumpSchema differs from threaddump.schema.json")
	}
}

// TestValidate checks that the validator finds what the schema forbids, so
// that TestWriteThreadsJSON's pass means something.
func TestValidate(t *testing.T) {
	schema := loadSchema(t)
	bad := []string{
		`{}`,
		`{"threadDump": {"processId": 1, "time": "", "runtimeVersion": "", "tracking": true, "live": 0, "threadContainers": []}}`,
		`{"threadDump": {"processId": "1", "time": "", "runtimeVersion": "", "tracking": true, "live": 0.5, "threadContainers": []}}`,
		`{"threadDump": {"processId": "1", "time": "", "runtimeVersion": "", "tracking": true, "live": 0, "threadContainers": [{"container": "scheduler", "parent": null, "owner": null, "threadCount": "1", "threads": [{"tid": "1"}]}]}}`,
		`{"threadDump": {"processId": "1", "time": "", "runtimeVersion": "", "tracking": true, "live": 0, "threadContainers": [{"container": "scheduler", "parent": null, "owner": null, "threadCount": "1", "threads": [{"tid": "1", "name": "", "state": "sleeping", "carrier": null, "parkedSince": null, "labels": {}, "stack": [], "createdBy": []}]}]}}`,
	}
	for _, doc := range bad {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if errs := validate(schema, schema, v, "$"); len(errs) == 0 {
			t.Errorf("valid, want invalid: %s", doc)
		}
	}
}

func TestWriteThreadsJSON(t *testing.T) {
	const n = 6
	s, _ := parked(t, n)
	var buf bytes.Buffer
	if err := WriteThreadsJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	schema := loadSchema(t)
	var v any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for _, e := range validate(schema, schema, v, "$") {
		t.Error(e)
	}
	var d jsonDump
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	cs := d.ThreadDump.ThreadContainers
	if len(cs) != 2 || cs[0].Container != "scheduler" || cs[0].Parent != nil || cs[1].Parent == nil || *cs[1].Parent != "scheduler" {
		t.Fatalf("containers: %s", buf.String())
	}
	if len(cs[0].Threads) != n/2 || len(cs[1].Threads) != n/2 || cs[1].ThreadCount != fmt.Sprint(n/2) {
		t.Errorf("%d threads in the scheduler and %d (count %s) in the group, want %d each", len(cs[0].Threads), len(cs[1].Threads), cs[1].ThreadCount, n/2)
	}
	for _, c := range cs {
		for _, th := range c.Threads {
			if th.State != "parked" || th.Labels["worker"] == "" || th.ParkedSince == nil || th.Carrier != nil {
				t.Errorf("thread %s: %+v", th.TID, th)
			}
			deep := 0
			for _, f := range th.Stack {
				if strings.Contains(f, ".parkDeep(") {
					deep++
				}
			}
			if deep != parkDepth || len(th.CreatedBy) == 0 {
				t.Errorf("thread %s: %d parkDeep frames (want %d), created by %v", th.TID, deep, parkDepth, th.CreatedBy)
			}
		}
	}
}

func TestWriteThreadsRunningJSON(t *testing.T) {
	s := spinning(t)
	var buf bytes.Buffer
	if err := WriteThreadsJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	schema := loadSchema(t)
	var v any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for _, e := range validate(schema, schema, v, "$") {
		t.Error(e)
	}
	var d jsonDump
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	cs := d.ThreadDump.ThreadContainers
	if len(cs) != 1 || len(cs[0].Threads) != 1 || cs[0].Threads[0].State != "running" {
		t.Fatalf("JSON: %s", buf.String())
	}
	if st := cs[0].Threads[0].Stack; !inOrder(st, spinChain...) {
		t.Errorf("JSON running thread's stack %q", st)
	}
}
