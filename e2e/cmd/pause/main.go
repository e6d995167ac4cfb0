// Command pause is the rig's stand-in for Kubernetes' pause image (registry.k8s.io/pause): a pod sandbox's
// first process, which holds the pod's namespaces open, reaps the zombies of a shared PID namespace, and
// exits 0 on SIGINT or SIGTERM, as the real pause.c does. Built static by e2e/images.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	version := flag.Bool("v", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("pause (stowage rig)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Logged once the handlers are set, so whoever waits for this line can signal without racing them.
	if os.Getpid() != 1 {
		klog.Warning("pause should be the first process")
	}
	run(sigs)
}

// run waits for signals: SIGCHLD reaps every exited child, SIGINT and SIGTERM end the process.
func run(sigs <-chan os.Signal) {
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		klog.Infof("Shutting down, got signal: %v", sig)
		klog.Flush()
		os.Exit(0)
	}
}

// reap collects every child that has exited; signals coalesce, so one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
