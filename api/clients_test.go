package api_test

// SPEC 10, "The contract serves generated clients": redocly lint with the
// recommended rules reports no error, and the clients that oapi-codegen (Go)
// and openapi-typescript generate from api/openapi.yaml compile in strict
// mode with a concrete type for every field.
//
// The generators are pinned in api/clienttest: the Go one in a module of its
// own (go.mod, go.sum), so that the product's dependencies stay as they are;
// the Node ones in package.json and package-lock.json, installed once into a
// cache by scripts/provision-node-tools.sh, which scripts/test.sh runs and
// whose directory it passes in AGGREGATOR_NODE_TOOLS. Under CI=true a
// missing tool fails these tests; elsewhere they skip, saying why.

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// missing fails the test under CI=true, where every check must run, and
// skips it elsewhere.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: this check is never skipped)", args...)
	}
	t.Skipf(format, args...)
}

// run runs name with args in dir and returns its standard output; it stops
// the test, quoting both outputs, when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), dir, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// schemaNames are the names of the document's component schemas.
func schemaNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for name := range loadSpec(t).Components.Schemas {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestGoClient generates the Go client with the pinned oapi-codegen into a
// temporary module, builds and vets it together with
// clienttest/testdata/usage.go (which reads members of the answers with
// the Go types they must have), and checks that no generated type holds an
// untyped value.
func TestGoClient(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		missing(t, "the go command is not on PATH: %v", err)
	}
	tools, err := filepath.Abs("clienttest")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	pkg := filepath.Join(mod, "client")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	// The temporary module has clienttest's requirements, so that it
	// builds against the pinned runtime.
	copyFile(t, filepath.Join(tools, "go.mod"), filepath.Join(mod, "go.mod"))
	copyFile(t, filepath.Join(tools, "go.sum"), filepath.Join(mod, "go.sum"))
	copyFile(t, filepath.Join(tools, "testdata", "usage.go"), filepath.Join(pkg, "usage.go"))
	generated := filepath.Join(pkg, "client.gen.go")
	env := []string{"GOWORK=off", "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly")}

	run(t, tools, env, goTool, "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", generated, spec)
	src, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	types, untyped := inspectGo(t, src)
	for _, u := range untyped {
		t.Errorf("generated Go: %s", u)
	}
	for _, name := range schemaNames(t) {
		if !types[name] {
			t.Errorf("generated Go has no type %s for the schema of that name", name)
		}
	}
	run(t, mod, env, goTool, "build", "./...")
	run(t, mod, env, goTool, "vet", "./...")
}

// inspectGo lists the types a generated Go file declares and every place
// where one of them holds an untyped or imprecise value: interface{} or
// any, float32 (numbers are format double), or an exported
// json.RawMessage. The unexported json.RawMessage of a oneOf's union type,
// read through its As… methods, is typed by those methods.
func inspectGo(t *testing.T, src []byte) (types map[string]bool, untyped []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "client.gen.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	types = map[string]bool{}
	var walk func(where string, exported bool, e ast.Expr)
	walk = func(where string, exported bool, e ast.Expr) {
		switch e := e.(type) {
		case *ast.Ident:
			if e.Name == "any" || e.Name == "float32" {
				untyped = append(untyped, fmt.Sprintf("%s is %s", where, e.Name))
			}
		case *ast.InterfaceType:
			if e.Methods == nil || len(e.Methods.List) == 0 {
				untyped = append(untyped, where+" is interface{}")
			}
		case *ast.SelectorExpr:
			if id, ok := e.X.(*ast.Ident); ok && id.Name == "json" && e.Sel.Name == "RawMessage" && exported {
				untyped = append(untyped, where+" is json.RawMessage")
			}
		case *ast.StarExpr:
			walk(where, exported, e.X)
		case *ast.ArrayType:
			walk(where+"[]", exported, e.Elt)
		case *ast.MapType:
			walk(where+"[key]", exported, e.Key)
			walk(where+"[]", exported, e.Value)
		case *ast.StructType:
			for _, field := range e.Fields.List {
				names := []string{"(embedded)"}
				if len(field.Names) > 0 {
					names = names[:0]
					for _, n := range field.Names {
						names = append(names, n.Name)
					}
				}
				for _, n := range names {
					walk(where+"."+n, token.IsExported(n) || n == "(embedded)", field.Type)
				}
			}
		}
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			types[ts.Name.Name] = true
			walk(ts.Name.Name, true, ts.Type)
		}
	}
	return types, untyped
}

func TestInspectGoFindsUntypedMembers(t *testing.T) {
	t.Parallel()
	src := `package client
import "encoding/json"
type A struct {
	Free  interface{}
	Any   *any
	Extra map[string]interface{}
	Small []float32
	Raw   json.RawMessage
	union json.RawMessage
	Fine  *struct{ N int64 }
}
type B = interface{}
type C interface{ Do() error }
`
	types, untyped := inspectGo(t, []byte(src))
	want := []string{
		"A.Free is interface{}", "A.Any is any", "A.Extra[] is interface{}",
		"A.Small[] is float32", "A.Raw is json.RawMessage", "B is interface{}",
	}
	if !slices.Equal(untyped, want) {
		t.Errorf("inspectGo found %q, want %q", untyped, want)
	}
	if !types["A"] || !types["B"] || !types["C"] {
		t.Errorf("inspectGo listed types %v", types)
	}
}
