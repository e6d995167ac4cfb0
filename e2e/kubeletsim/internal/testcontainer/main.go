// Command testcontainer is the program the kubeletsim tests run as a container. Each argument is a step,
// run in order; it prints what it sees, so the tests read it back from the container log:
//
//	id                 print uid=, gid= and groups=
//	env                print the environment, sorted, one variable a line
//	write:PATH=TEXT    write TEXT to PATH
//	stat:PATH          print "exists PATH" or "absent PATH"
//	waitfile:PATH      wait until PATH exists
//	count:PATH:N       add one to the number in PATH; exit 1 until it reaches N
//	ignore-term        catch SIGTERM and only log it, as the Mountpoint mounter does
//	sleep              sleep until killed
//	exit:N             exit with code N
//	--marker=...       ignored: lets a test find the process on the host
package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	for _, step := range os.Args[1:] {
		if err := run(step); err != nil {
			fmt.Fprintf(os.Stderr, "step %s: %v\n", step, err)
			os.Exit(2)
		}
	}
}

func run(step string) error {
	verb, arg, _ := strings.Cut(step, ":")
	switch verb {
	case "id":
		groups, err := os.Getgroups()
		if err != nil {
			return err
		}
		fmt.Printf("uid=%d gid=%d groups=%v\n", os.Getuid(), os.Getgid(), groups)
	case "env":
		env := os.Environ()
		slices.Sort(env)
		for _, e := range env {
			fmt.Println("env " + e)
		}
	case "write":
		p, text, _ := strings.Cut(arg, "=")
		return os.WriteFile(p, []byte(text), 0o644)
	case "stat":
		if _, err := os.Lstat(arg); err == nil {
			fmt.Println("exists " + arg)
		} else {
			fmt.Println("absent " + arg)
		}
	case "waitfile":
		for {
			if _, err := os.Stat(arg); err == nil {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	case "count":
		return count(arg)
	case "ignore-term":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		go func() {
			for range ch {
				fmt.Println("SIGTERM received, ignored")
			}
		}()
		fmt.Println("ignoring SIGTERM")
	case "sleep":
		fmt.Println("sleeping")
		select {}
	case "exit":
		code, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		os.Exit(code)
	default:
		if !strings.HasPrefix(step, "--marker=") {
			return fmt.Errorf("unknown step")
		}
	}
	return nil
}

func count(arg string) error {
	p, ns, _ := strings.Cut(arg, ":")
	limit, err := strconv.Atoi(ns)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	n++
	if err := os.WriteFile(p, []byte(strconv.Itoa(n)), 0o644); err != nil {
		return err
	}
	fmt.Printf("run %d of %d\n", n, limit)
	if n < limit {
		os.Exit(1)
	}
	return nil
}
