//go:build tools

// Package tools pins versitygw, the S3 server the e2e rig builds with GOWORK=off
// (go build github.com/versity/versitygw/cmd/versitygw) into the git-ignored cache.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
