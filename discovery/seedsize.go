package discovery

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxSeedSize bounds a seed from any source: a real one, with a CA key
// and a few certificates, is a few KiB. A bigger one is refused before it
// is parsed, so a hostile or broken source cannot stall the boot or flood
// the console with its echo.
const MaxSeedSize = 1 << 20

// ErrSeedTooLarge means a seed is over MaxSeedSize (wrapped).
var ErrSeedTooLarge = errors.New("seed too large")

// checkSeedSize refuses data over MaxSeedSize.
func checkSeedSize(n int) error {
	if n > MaxSeedSize {
		return fmt.Errorf("%w: more than %d bytes (%d); a seed is a few KiB", ErrSeedTooLarge, MaxSeedSize, n)
	}
	return nil
}

// ReadSeedFile reads the seed file at path, reading no more than one byte
// past MaxSeedSize.
func ReadSeedFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSeedSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := checkSeedSize(len(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
