package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConsoleEnd(t *testing.T) {
	assert.Equal(t, "empty", consoleEnd("", 3))
	assert.Equal(t, "empty", consoleEnd("\r\n \n", 3))
	// Firmware escapes and carriage returns go; blank lines are skipped.
	log := "\x1b[2J\x1b[01;01HBdsDxe: loading Boot0001\r\n\r\n[    1.2] Run /init as init process\n\n"
	assert.Equal(t, `"BdsDxe: loading Boot0001" "[    1.2] Run /init as init process"`, consoleEnd(log, 3))
	assert.Equal(t, `"[    1.2] Run /init as init process"`, consoleEnd(log, 1))
	long := make([]byte, 200)
	for i := range long {
		long[i] = 'x'
	}
	assert.Equal(t, `"`+string(long[:160])+`..."`, consoleEnd(string(long), 2))
}
