package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRSSOf(t *testing.T) {
	status := "Name:\tinit\nVmRSS:\t   23152 kB\nRssAnon:\t    7228 kB\nRssFile:\t   15924 kB\nRssShmem:\t       0 kB\n"
	assert.Equal(t, "23152 KiB (anon 7228, file 15924)", rssOf(status))
	assert.Equal(t, "100 KiB", rssOf("VmRSS:\t100 kB\n"), "an old kernel without the parts")
	assert.Equal(t, "?", rssOf("Name:\tinit\n"))
}
