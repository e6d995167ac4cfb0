package images

import (
	"fmt"
	"os"
	"strings"
)

// TableEntry is one line of deploy/images/images.tsv: an image and the module whose binaries it ships.
type TableEntry struct {
	Image  string
	Module string
}

// ReadImageTable reads images.tsv: `image<TAB>module` lines; blank lines and # comments are skipped.
func ReadImageTable(file string) ([]TableEntry, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []TableEntry
	for i, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want `image module`, got %q", file, i+1, l)
		}
		out = append(out, TableEntry{Image: f[0], Module: f[1]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no images", file)
	}
	return out, nil
}
