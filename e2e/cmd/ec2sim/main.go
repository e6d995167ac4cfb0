// Command ec2sim runs the EC2 emulator (package ec2sim) as a process and prints its endpoints.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// instanceFlags collects repeated --instance id=...,zone=...,type=...,local=true flags.
type instanceFlags []ec2sim.Instance

func (f *instanceFlags) String() string { return fmt.Sprint(len(*f), " instances") }

func (f *instanceFlags) Set(v string) error {
	var in ec2sim.Instance
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", kv)
		}
		switch k {
		case "id":
			in.ID = val
		case "zone":
			in.Zone = val
		case "type":
			in.Type = val
		case "local":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return fmt.Errorf("local=%q: %w", val, err)
			}
			in.Local = b
		default:
			return fmt.Errorf("unknown instance key %q (want id, zone, type, local)", k)
		}
	}
	if in.ID == "" || in.Zone == "" {
		return fmt.Errorf("--instance %q needs id and zone", v)
	}
	*f = append(*f, in)
	return nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ec2sim:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		klog.Fatalf("ec2sim: %v", err)
	}
}

// parseFlags turns the command line into the emulator's config.
func parseFlags(args []string) (ec2sim.Config, error) {
	var cfg ec2sim.Config
	var instances instanceFlags
	var zones, faults, accessKey, secretKey, limits string
	fs := flag.NewFlagSet("ec2sim", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "address of the EC2 endpoint")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for state and volume files (required)")
	fs.StringVar(&cfg.Region, "region", "us-east-1", "region")
	fs.StringVar(&zones, "zones", "", "comma-separated availability zones (default <region>a,b,c)")
	fs.Var(&instances, "instance", "simulated instance: id=i-...,zone=us-east-1a,type=m5.large,local=true (repeatable)")
	fs.StringVar(&cfg.DeviceLinkDir, "device-link-dir", "/dev/disk/by-id", "where NVMe by-id links of local attachments are made")
	fs.Float64Var(&cfg.TimeScale, "time-scale", 1.0, "multiplier of EC2's delays (0.01 for fast tests)")
	fs.StringVar(&faults, "faults", "", `fault profile as JSON, e.g. {"throttleRate":0.1,"latency":200000000} or, for slow attaches only, {"slow":{"AttachVolume":{"rate":0.25,"latency":3000000000}}}`)
	fs.StringVar(&limits, "limits", "", `API rate limits: "ec2" for EC2's per-action request throttling (its documented bucket sizes and refill rates), or JSON of ec2sim.Limits such as {"mutatingRate":5,"mutatingBurst":50,"describeRate":20,"describeBurst":100} (two class buckets); empty = unlimited`)
	fs.DurationVar(&cfg.ModifyCooldown, "modify-cooldown", 0, "time between modifications of one volume (EC2: 6h; 0 = off)")
	fs.StringVar(&accessKey, "access-key-id", "", "verify SigV4 signatures with this access key ID (and --secret-access-key)")
	fs.StringVar(&secretKey, "secret-access-key", "", "secret key for SigV4 verification")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.DataDir == "" {
		return cfg, fmt.Errorf("--data-dir is required")
	}
	cfg.Instances = instances
	if zones != "" {
		cfg.Zones = strings.Split(zones, ",")
	}
	if faults != "" {
		if err := json.Unmarshal([]byte(faults), &cfg.Faults); err != nil {
			return cfg, fmt.Errorf("--faults: %w", err)
		}
	}
	if limits == "ec2" {
		cfg.Limits = ec2sim.EC2Limits()
	} else if limits != "" {
		if err := json.Unmarshal([]byte(limits), &cfg.Limits); err != nil {
			return cfg, fmt.Errorf("--limits: %w", err)
		}
	}
	if accessKey != "" || secretKey != "" {
		cfg.Credentials = &ec2sim.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}
	}
	return cfg, nil
}

func run(cfg ec2sim.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.Logger = klog.Background()
	s, err := ec2sim.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("EC2_ENDPOINT=%s\n", s.URL())
	for _, in := range cfg.Instances {
		fmt.Printf("IMDS_ENDPOINT_%s=%s\n", in.ID, s.IMDSURL(in.ID))
	}
	<-ctx.Done()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("close timed out")
	}
}
