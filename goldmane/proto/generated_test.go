package proto_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestGeneratedMatchesProto: api.pb.go and api_grpc.pb.go are what `make
// generate` makes from api.proto (protoc from Debian's protobuf-compiler,
// hack/install-packages.sh; the plugins at go.mod's versions).
func TestGeneratedMatchesProto(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Fatalf("no protoc (apt-get install protobuf-compiler; hack/install-packages.sh): %v", err)
	}
	bin, out := t.TempDir(), t.TempDir()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(goBin, "build", "-o", bin+"/", "google.golang.org/protobuf/cmd/protoc-gen-go", "google.golang.org/grpc/cmd/protoc-gen-go-grpc")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the protoc plugins: %v\n%s", err, b)
	}
	gen := exec.Command(protoc, "--plugin=protoc-gen-go="+filepath.Join(bin, "protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc="+filepath.Join(bin, "protoc-gen-go-grpc"),
		"--go_out="+out, "--go_opt=paths=source_relative", "--go-grpc_out="+out, "--go-grpc_opt=paths=source_relative", "api.proto")
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	for _, f := range []string{"api.pb.go", "api_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what api.proto generates: run make generate", f)
		}
	}
}
