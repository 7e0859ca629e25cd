package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRSSOf(t *testing.T) {
	status := "Name:\tinit\nVmRSS:\t   30004 kB\nRssAnon:\t   10800 kB\nRssFile:\t       4 kB\nRssShmem:\t   19200 kB\n"
	assert.Equal(t, "30004 KiB (anon 10800, file 4, shmem 19200)", rssOf(status))
	assert.Equal(t, "100 KiB", rssOf("VmRSS:\t100 kB\n"), "an old kernel without the parts")
	assert.Equal(t, "?", rssOf("Name:\tinit\n"))
}
