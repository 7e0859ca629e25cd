package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRSSOf(t *testing.T) {
	status := "Name:\tinit\nVmRSS:\t   30004 kB\nRssAnon:\t   10800 kB\nRssFile:\t       4 kB\nRssShmem:\t   19200 kB\n"
	rollup := "00400000-7ffc8d3f1000 ---p 00000000 00:00 0                  [rollup]\nRss:               30004 kB\nPss:               21012 kB\nPss_Anon:          10800 kB\n"
	assert.Equal(t, "30004 KiB (anon 10800, file 4, shmem 19200; pss 21012)", rssOf(status, rollup))
	assert.Equal(t, "30004 KiB (anon 10800, file 4, shmem 19200)", rssOf(status, ""), "no smaps_rollup")
	assert.Equal(t, "100 KiB", rssOf("VmRSS:\t100 kB\n", rollup), "an old kernel without the parts")
	assert.Equal(t, "?", rssOf("Name:\tinit\n", rollup))
}
