// Package version holds the build version of a Stowage binary, stamped at link time.
package version

import (
	"fmt"
	"io"
)

// Version is set by the Makefile with
// -ldflags "-X github.com/stowage-csi/stowage/shared/version.Version=<version>".
// It is the one package-level variable the repository allows: the linker can only stamp variables.
var Version = "dev"

// String returns "<binary> <version>", the line printed by --version.
func String(binary string) string {
	return fmt.Sprintf("%s %s", binary, Version)
}

// Print writes String(binary) and a newline to w.
func Print(w io.Writer, binary string) error {
	_, err := fmt.Fprintln(w, String(binary))
	return err
}

// UserAgent returns "<binary>/<version>", the user agent sent to the API server, so audit logs and API
// Priority and Fairness can tell Stowage binaries apart.
func UserAgent(binary string) string {
	return binary + "/" + Version
}
