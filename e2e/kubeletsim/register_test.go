package kubeletsim

import "testing"

func TestNodeIDAnnotationKeepsOtherDrivers(t *testing.T) {
	tests := []struct {
		name, existing, want string
		wantErr              bool
	}{
		{name: "new node", existing: "", want: `{"ebs.csi.aws.com":"i-1"}`},
		{name: "another driver's entry is kept", existing: `{"s3.csi.stowage.io":"node-1"}`,
			want: `{"ebs.csi.aws.com":"i-1","s3.csi.stowage.io":"node-1"}`},
		{name: "own entry is replaced", existing: `{"ebs.csi.aws.com":"i-0"}`, want: `{"ebs.csi.aws.com":"i-1"}`},
		{name: "not JSON", existing: "i-0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nodeIDAnnotation(tt.existing, "ebs.csi.aws.com", "i-1")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("nodeIDAnnotation(%q) = %q, %v; want %q (error: %t)", tt.existing, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
