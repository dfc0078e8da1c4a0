// Command archstat prints the shape of a Go module: which of its packages
// import which, and its largest functions and types. It reads source only, so
// it can be pointed at an older checkout to compare:
//
//	go run ./internal/tools/archstat [-top N] [DIR]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type funcStat struct {
	name        string
	lines, cycl int
}

type typeStat struct {
	name            string
	fields, methods int
}

func main() {
	top := flag.Int("top", 5, "how many of the largest functions and types to list")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	if err := run(root, *top); err != nil {
		fmt.Fprintln(os.Stderr, "archstat:", err)
		os.Exit(1)
	}
}

func run(root string, top int) error {
	module, err := modulePath(root)
	if err != nil {
		return err
	}
	imports := map[string]map[string]bool{}
	var funcs []funcStat
	types := map[string]*typeStat{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "bin" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if dep, ok := strings.CutPrefix(p, module+"/"); ok {
				imports[pkg][dep] = true
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				name := pkg + "." + d.Name.Name
				if d.Recv != nil && len(d.Recv.List) > 0 {
					recv := recvName(d.Recv.List[0].Type)
					name = pkg + ".(" + recv + ")." + d.Name.Name
					ts := typeOf(types, pkg+"."+recv)
					ts.methods++
				}
				lines := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				funcs = append(funcs, funcStat{name, lines, cyclomatic(d.Body)})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							typeOf(types, pkg+"."+ts.Name.Name).fields = st.Fields.NumFields()
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	printGraph(imports)
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].lines > funcs[j].lines })
	fmt.Printf("\nlargest functions (lines, cyclomatic):\n")
	for _, f := range funcs[:min(top, len(funcs))] {
		fmt.Printf("  %4d %3d  %s\n", f.lines, f.cycl, f.name)
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].cycl > funcs[j].cycl })
	fmt.Printf("\nmost complex functions (cyclomatic, lines):\n")
	for _, f := range funcs[:min(top, len(funcs))] {
		fmt.Printf("  %3d %4d  %s\n", f.cycl, f.lines, f.name)
	}
	var ts []*typeStat
	for _, t := range types {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		return ts[i].fields+ts[i].methods > ts[j].fields+ts[j].methods
	})
	fmt.Printf("\nlargest types (fields, methods):\n")
	for _, t := range ts[:min(top, len(ts))] {
		fmt.Printf("  %3d %3d  %s\n", t.fields, t.methods, t.name)
	}
	return nil
}

func printGraph(imports map[string]map[string]bool) {
	var pkgs []string
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	fmt.Printf("packages (%d) and the module packages each imports:\n", len(pkgs))
	for _, p := range pkgs {
		var deps []string
		for d := range imports[p] {
			deps = append(deps, d)
		}
		sort.Strings(deps)
		fmt.Printf("  %-28s %s\n", p, strings.Join(deps, " "))
	}
}

func typeOf(types map[string]*typeStat, name string) *typeStat {
	if types[name] == nil {
		types[name] = &typeStat{name: name}
	}
	return types[name]
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// cyclomatic counts decision points plus one, as gocyclo does.
func cyclomatic(body *ast.BlockStmt) int {
	n := 1
	ast.Inspect(body, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if x.List != nil {
				n++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}

func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read go.mod: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(p), nil
		}
	}
	return "", fmt.Errorf("no module line in %s/go.mod", root)
}
