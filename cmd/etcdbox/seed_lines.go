package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/go-multierror"
	"go.yaml.in/yaml/v3"

	"github.com/etcdbox/etcdbox/seed"
)

// seedProblems formats what seed.Parse said about file (data)
// for a terminal: one problem per line, each led by the line of its key in
// file when it can be found. (The node prints the same problems on one
// line, for its console.) Other errors come back as they are.
func seedProblems(file string, data []byte, err error) error {
	var me *multierror.Error
	if !errors.As(err, &me) {
		return fmt.Errorf("%s: %w", file, err)
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // it parsed once already; a failure only loses line numbers
	lines := []string{fmt.Sprintf("%s: %d problem(s):", file, len(me.Errors))}
	for _, e := range me.Errors {
		at := file
		var fe *seed.FieldError
		if errors.As(e, &fe) {
			if n := keyLine(&root, fe.Path); n > 0 {
				at += ":" + strconv.Itoa(n)
			}
		}
		lines = append(lines, "  "+at+": "+e.Error())
	}
	return &seedError{msg: strings.Join(lines, "\n"), err: err}
}

// seedError is seedProblems' error: its text, and the parser's error
// underneath.
type seedError struct {
	msg string
	err error
}

func (e *seedError) Error() string { return e.msg }
func (e *seedError) Unwrap() error { return e.err }

// keyLine returns the line of the deepest key of path (a.b[2].c) found in
// the YAML document root, 0 when none is.
func keyLine(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	line := 0
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			next := mapValue(n, key)
			if next == nil {
				return line
			}
			line, n = next[0].Line, next[1]
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return line
}

// mapValue returns the key and value nodes of key in the mapping n.
func mapValue(n *yaml.Node, key string) []*yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i : i+2]
		}
	}
	return nil
}
