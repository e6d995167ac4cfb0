package mountoptions

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Cache describes the Mountpoint Pod's local cache volume, set by the volume attributes cache,
// cacheEmptyDirSizeLimit and cacheEmptyDirMedium.
type Cache struct {
	// Attribute is the volume attribute "cache" ("", "emptyDir", "ephemeral").
	Attribute string
	// PodHasVolume is true when the Mountpoint Pod has the local-cache volume.
	PodHasVolume bool
	// EmptyDirSizeLimit and EmptyDirMedium are the attributes cacheEmptyDirSizeLimit/-Medium.
	EmptyDirSizeLimit string
	EmptyDirMedium    string
}

// Request is what the rewrite needs from a NodePublishVolume call.
type Request struct {
	// ReadOnly is the request's readonly flag or a reader-only access mode.
	ReadOnly bool
	// FSGroup is the volume capability's volume_mount_group (the workload's fsGroup), or "".
	FSGroup string
	Cache   Cache
	// UserAgentPrefix replaces any --user-agent-prefix.
	UserAgentPrefix string
	// CacheDir is where the Mountpoint Pod mounts its cache volume.
	CacheDir string
}

// Result is what the node does with the options: the arguments sent, the environment they turn into,
// and whether the kernel mount is read-only.
type Result struct {
	Args     Args
	Env      map[string]string
	ReadOnly bool
	// AllowOther is whether the kernel mount gets allow_other (Mountpoint runs as another user than the
	// node, so it always does once the rewrite added --allow-root).
	AllowOther bool
}

// Rewrite applies upstream's rewrites to parsed args (which it modifies) and returns the result.
func Rewrite(args Args, r Request) (Result, error) {
	res := Result{Args: args, Env: map[string]string{}}
	// Read-only is the kernel mount's flag, not Mountpoint's: the fd is already read-only.
	if args.Has("--read-only") || r.ReadOnly {
		res.ReadOnly = true
	}
	delete(args, "--read-only")

	if r.FSGroup != "" {
		if _, err := strconv.ParseUint(r.FSGroup, 10, 32); err != nil {
			return Result{}, fmt.Errorf("volume_mount_group %q is not a group ID", r.FSGroup)
		}
		args.SetIfAbsent("--gid", r.FSGroup)
		args.SetIfAbsent("--allow-other", "")
		args.SetIfAbsent("--dir-mode", "770")
		args.SetIfAbsent("--file-mode", "660")
	}
	// Mountpoint runs as uid 1000, not as the node's root: without allow_root the node (and the kubelet's
	// checks of the target) could not even stat the mount.
	if !args.Has("--allow-other") {
		args.SetIfAbsent("--allow-root", "")
	}
	res.AllowOther = true

	if v, ok := args["--aws-max-attempts"]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return Result{}, fmt.Errorf("mount option --aws-max-attempts=%q must be a positive integer", v)
		}
		res.Env["AWS_MAX_ATTEMPTS"] = v
		delete(args, "--aws-max-attempts")
	}
	args["--user-agent-prefix"] = r.UserAgentPrefix
	if r.UserAgentPrefix == "" {
		delete(args, "--user-agent-prefix")
	}
	if err := rewriteCache(args, r); err != nil {
		return Result{}, err
	}
	return res, nil
}

// rewriteCache points --cache at the Pod's cache volume and keeps --max-cache-size within an emptyDir's
// size limit (95% of it on disk, so Mountpoint's own files fit beside the cache).
func rewriteCache(args Args, r Request) error {
	if r.Cache.Attribute != "" && args.Has("--cache") {
		return fmt.Errorf("mount option --cache and volume attribute cache=%q are exclusive; use the attribute", r.Cache.Attribute)
	}
	if r.Cache.PodHasVolume {
		args["--cache"] = r.CacheDir
	}
	if r.Cache.EmptyDirSizeLimit == "" {
		return nil
	}
	q, err := resource.ParseQuantity(r.Cache.EmptyDirSizeLimit)
	if err != nil || q.Sign() <= 0 {
		return fmt.Errorf("volume attribute cacheEmptyDirSizeLimit=%q is not a positive quantity", r.Cache.EmptyDirSizeLimit)
	}
	limitMiB := q.Value() >> 20
	if v, ok := args["--max-cache-size"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("mount option --max-cache-size=%q must be a number of MiB", v)
		}
		if n > limitMiB {
			return fmt.Errorf("mount option --max-cache-size=%d MiB exceeds volume attribute cacheEmptyDirSizeLimit=%s", n, r.Cache.EmptyDirSizeLimit)
		}
	}
	if r.Cache.EmptyDirMedium == "Memory" {
		return nil
	}
	ceiling := limitMiB * 95 / 100
	if v, ok := args["--max-cache-size"]; !ok {
		args["--max-cache-size"] = strconv.FormatInt(ceiling, 10)
	} else if n, _ := strconv.ParseInt(v, 10, 64); n > ceiling {
		args["--max-cache-size"] = strconv.FormatInt(ceiling, 10)
	}
	return nil
}
