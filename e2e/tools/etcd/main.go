// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 because the proxy does not serve
// the module (go.etcd.io/etcd/v3) that holds upstream's own main package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
