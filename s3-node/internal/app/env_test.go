package app

import (
	"reflect"
	"testing"
)

// TestNodeEnvPassesRegionsAndEndpoints: the operator's region and endpoint settings reach Mountpoint;
// credentials and anything else do not go this way.
func TestNodeEnvPassesRegionsAndEndpoints(t *testing.T) {
	env := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_STS": "https://sts.internal", "AWS_ENDPOINT_URL_S3": "https://s3.internal",
		"AWS_ACCESS_KEY_ID": "k", "AWS_ROLE_ARN": "arn", "HTTPS_PROXY": "http://p"}
	got := nodeEnv(func(k string) string { return env[k] })
	want := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_STS": "https://sts.internal", "AWS_ENDPOINT_URL_S3": "https://s3.internal"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodeEnv = %v, want %v", got, want)
	}
}
