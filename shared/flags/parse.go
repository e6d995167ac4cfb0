package flags

import (
	"flag"

	"k8s.io/klog/v2"
)

// ParseInterspersed parses args as fs.Parse does, but goes on past a positional argument, as the pflag-based
// upstream sidecars do, and keeps the positional arguments in fs.Args() instead of refusing them: every
// upstream sidecar and node sidecar starts with a stray word in its args (a leftover value, a quoting slip),
// so Stowage's must too. The caller warns about fs.Args(), which upstream ignores without a word. After "--"
// everything is positional, as with flag and pflag.
func ParseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// WarnPositional logs the positional arguments ParseInterspersed kept, if any: upstream ignores them without a
// word, and whoever wrote them meant something that does not happen.
func WarnPositional(logger klog.Logger, args []string) {
	if len(args) > 0 {
		logger.Info("Warning: positional arguments are ignored, as upstream ignores them", "args", args)
	}
}
