package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/spf13/cobra/doc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// updateDocs is set by `make docs`: TestDocsFresh then writes the pages
// instead of comparing them.
const updateDocs = "ETCDBOX_UPDATE_DOCS"

// docsDate is the date the man pages carry: a fixed one, so that the
// pages change only when the commands do.
var docsDate = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// genDocs writes the flag reference (Markdown, one page per command) to
// dir/cli and the man pages to dir/man, from the command tree itself.
func genDocs(t *testing.T, dir string) {
	t.Helper()
	root := newRoot()
	root.InitDefaultCompletionCmd()
	root.DisableAutoGenTag = true
	for _, sub := range []string{"cli", "man"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, sub), 0o755))
	}
	require.NoError(t, doc.GenMarkdownTree(root, filepath.Join(dir, "cli")))
	require.NoError(t, doc.GenManTree(root, &doc.GenManHeader{
		Title: "ETCDBOX", Section: "1", Source: "etcdbox", Manual: "etcdbox manual", Date: &docsDate,
	}, filepath.Join(dir, "man")))
}

// TestDocsFresh fails when docs/cli or docs/man differ from what the
// commands generate: a flag or verb changed without `make docs`.
func TestDocsFresh(t *testing.T) {
	docs := filepath.Join(testenv.Root(t), "docs")
	if os.Getenv(updateDocs) != "" {
		for _, sub := range []string{"cli", "man"} {
			require.NoError(t, os.RemoveAll(filepath.Join(docs, sub)))
		}
		genDocs(t, docs)
		return
	}
	fresh := t.TempDir()
	genDocs(t, fresh)
	for _, sub := range []string{"cli", "man"} {
		want, have := readTree(t, filepath.Join(fresh, sub)), readTree(t, filepath.Join(docs, sub))
		assert.Equal(t, keys(want), keys(have), "docs/%s lists other pages than the commands make: run make docs", sub)
		for name, b := range want {
			if h, ok := have[name]; ok && !bytes.Equal(b, h) {
				t.Errorf("docs/%s/%s is stale: run make docs", sub, name)
			}
		}
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return files
	}
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = b
	}
	return files
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}
