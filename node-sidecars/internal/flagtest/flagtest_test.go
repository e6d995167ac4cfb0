package flagtest

import (
	"errors"
	"flag"
	"testing"
)

type config struct{ name string }

func (c *config) Validate() error {
	if c.name == "" {
		return errors.New("--name is required")
	}
	return nil
}

func addFlags(fs *flag.FlagSet) *config {
	c := &config{}
	fs.StringVar(&c.name, "name", "", "a sidecar's own flag")
	return c
}

// TestParse: the sidecar's own flags and the common ones (-v) parse into the configuration, and Validate's
// verdict comes back with it.
func TestParse(t *testing.T) {
	cfg, err := Parse(t, "test-binary", addFlags, []string{"-v=2", "--name=x"})
	if err != nil || cfg.name != "x" {
		t.Errorf("Parse = %+v, %v; want name x and no error", cfg, err)
	}
	if _, err := Parse(t, "test-binary", addFlags, nil); err == nil {
		t.Error("Parse without --name: no error, want Validate's")
	}
}

// TestRefused: an expected refusal is reported as such, and no expectation with no error lets the case go on.
func TestRefused(t *testing.T) {
	if !Refused(t, errors.New("--name is required"), "--name") {
		t.Error("Refused with a wanted error: false, want true")
	}
	if Refused(t, nil, "") {
		t.Error("Refused with no error and none wanted: true, want false")
	}
}
