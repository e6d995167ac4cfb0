package rendered

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// CheckFlags runs bin with args, env and --version, which every Stowage binary (and upstream's sidecars)
// answers after parsing its flags and without doing anything: a flag the chart passes that the binary
// rejects fails here, with the binary's message, before a stack starts a process that would exit and leave
// a test waiting.
func CheckFlags(ctx context.Context, bin string, args, env []string) error {
	cmd := exec.CommandContext(ctx, bin, append(append([]string(nil), args...), "--version")...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s rejects the args the chart renders (%s): %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return nil
}
