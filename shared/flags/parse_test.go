package flags

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseInterspersedKeepsFlagsAfterAPositionalArgument(t *testing.T) {
	tests := []struct {
		name           string
		args           []string
		wantName       string
		wantVerbose    bool
		wantPositional []string
	}{
		{name: "flags only", args: []string{"--name=a", "-v"}, wantName: "a", wantVerbose: true},
		{name: "stray word first", args: []string{"stray", "--name=a", "-v"}, wantName: "a", wantVerbose: true, wantPositional: []string{"stray"}},
		{name: "stray words between", args: []string{"--name", "a", "x", "-v", "y"}, wantName: "a", wantVerbose: true, wantPositional: []string{"x", "y"}},
		{name: "after --", args: []string{"--name=a", "--", "-v", "z"}, wantName: "a", wantPositional: []string{"-v", "z"}},
		{name: "stray then --", args: []string{"x", "--", "-v"}, wantPositional: []string{"x", "-v"}},
		{name: "nothing", args: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			name := fs.String("name", "", "")
			verbose := fs.Bool("v", false, "")
			if err := ParseInterspersed(fs, tc.args); err != nil {
				t.Fatal(err)
			}
			if *name != tc.wantName || *verbose != tc.wantVerbose || !slices.Equal(fs.Args(), tc.wantPositional) {
				t.Errorf("name %q, v %t, args %q; want %q, %t, %q", *name, *verbose, fs.Args(), tc.wantName, tc.wantVerbose, tc.wantPositional)
			}
		})
	}
}

func TestParseInterspersedStillRefusesUnknownFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := ParseInterspersed(fs, []string{"stray", "--no-such-flag"}); err == nil {
		t.Fatal("an unknown flag after a positional argument was accepted")
	}
}

func TestParsedKeepsThePositionalArguments(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := Register(fs, Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ParseInterspersed(fs, []string{"stray", "--kube-api-qps=5", "word"}); err != nil {
		t.Fatal(err)
	}
	c.Parsed(fs)
	if !slices.Equal(c.Positional, []string{"stray", "word"}) || !c.KubeAPIRateSet {
		t.Errorf("Positional %q, KubeAPIRateSet %t; want [stray word], true", c.Positional, c.KubeAPIRateSet)
	}
}
