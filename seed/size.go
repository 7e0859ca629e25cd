package seed

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxSize bounds a seed from any source: a real one, with a CA key
// and a few certificates, is a few KiB. A bigger one is refused before it
// is parsed, so a hostile or broken source cannot stall the boot or flood
// the console with its echo.
const MaxSize = 1 << 20

// ErrTooLarge means a seed is over MaxSize (wrapped).
var ErrTooLarge = errors.New("seed too large")

// checkSize refuses data over MaxSize.
func checkSize(n int) error {
	if n > MaxSize {
		return fmt.Errorf("%w: more than %d bytes (%d); a seed is a few KiB", ErrTooLarge, MaxSize, n)
	}
	return nil
}

// ReadFile reads the seed file at path, reading no more than one byte
// past MaxSize.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := checkSize(len(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
