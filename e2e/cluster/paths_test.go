package cluster

import "testing"

func TestCacheDirPrefersEnvironment(t *testing.T) {
	tests := []struct {
		name, env, root, want string
	}{
		{name: "default under the repository", root: "/repo", want: "/repo/.cache"},
		{name: "environment override", env: "/var/cache/stowage", root: "/repo", want: "/var/cache/stowage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cacheDir(tt.env, tt.root); got != tt.want {
				t.Errorf("cacheDir(%q, %q) = %q, want %q", tt.env, tt.root, got, tt.want)
			}
		})
	}
}
