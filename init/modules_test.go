package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestModuleParams: module.param words of the command line go to their
// module, and the watchdog core keeps a watchdog running through a
// restart unless the command line says otherwise.
func TestModuleParams(t *testing.T) {
	got := withDefaultParams(moduleParams(map[string]string{
		"console": "ttyS0", "etcdbox.slot": "a", "ahci.async_probe": "1", "i6300esb.heartbeat": "60", "ahci.mobile_lpm_policy": "1",
	}))
	assert.Equal(t, "async_probe=1 mobile_lpm_policy=1", sortedWords(got["ahci"]))
	assert.Equal(t, "heartbeat=60", got["i6300esb"])
	assert.Equal(t, "stop_on_reboot=0", got["watchdog"], "kept running through a kexec's restart notifiers")
	assert.NotContains(t, got, "etcdbox")
	assert.NotContains(t, got, "console")

	got = withDefaultParams(moduleParams(map[string]string{"watchdog.stop_on_reboot": "1", "watchdog.handle_boot_enabled": "0"}))
	assert.Equal(t, "handle_boot_enabled=0 stop_on_reboot=1", sortedWords(got["watchdog"]), "the command line wins")
}

// sortedWords is s's words in order: moduleParams joins a module's
// parameters in the command line map's order, which is random.
func sortedWords(s string) string {
	w := strings.Fields(s)
	slices.Sort(w)
	return strings.Join(w, " ")
}
