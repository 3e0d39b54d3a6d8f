package cluster

import (
	"bufio"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The benchmark (bench_privileged_test.go) reads where a pod's time went
// from containerd's log (its CRI calls) and the calico plugin's log (the
// CNI ADD). The parsers are here, with the lines they read.

// sandboxTimes is what containerd's log says of one pod sandbox.
type sandboxTimes struct {
	id                          string    // the sandbox (and CNI container) ID
	start, done, containerStart time.Time // RunPodSandbox called, returned; StartContainer returned
}

var (
	sandboxStartLine = regexp.MustCompile(`^time="([^"]+)".*msg="RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),[^}]*\}"`)
	sandboxDoneLine  = regexp.MustCompile(`^time="([^"]+)".*msg="RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),[^}]*\} returns sandbox id \\"([0-9a-f]+)\\""`)
	containerIDLine  = regexp.MustCompile(`msg="CreateContainer within sandbox \\"([0-9a-f]+)\\" for &ContainerMetadata\{[^}]*\} returns container id \\"([0-9a-f]+)\\""`)
	containerUpLine  = regexp.MustCompile(`^time="([^"]+)".*msg="StartContainer for \\"([0-9a-f]+)\\" returns successfully"`)
)

// parseContainerdLog reads, per pod name, its first sandbox's times from
// containerd's log (logrus text lines).
func parseContainerdLog(r io.Reader) map[string]*sandboxTimes {
	pods := map[string]*sandboxTimes{}
	bySandbox := map[string]*sandboxTimes{}
	byContainer := map[string]*sandboxTimes{}
	get := func(name string) *sandboxTimes {
		if pods[name] == nil {
			pods[name] = &sandboxTimes{}
		}
		return pods[name]
	}
	ts := func(s string) time.Time { t, _ := time.Parse(time.RFC3339Nano, s); return t }
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := sandboxDoneLine.FindStringSubmatch(l); m != nil {
			if p := get(m[2]); p.id == "" {
				p.id, p.done = m[3], ts(m[1])
				bySandbox[p.id] = p
			}
		} else if m := sandboxStartLine.FindStringSubmatch(l); m != nil {
			if p := get(m[2]); p.start.IsZero() {
				p.start = ts(m[1])
			}
		} else if m := containerIDLine.FindStringSubmatch(l); m != nil {
			if p := bySandbox[m[1]]; p != nil {
				byContainer[m[2]] = p
			}
		} else if m := containerUpLine.FindStringSubmatch(l); m != nil {
			if p := byContainer[m[2]]; p != nil && p.containerStart.IsZero() {
				p.containerStart = ts(m[1])
			}
		}
	}
	return pods
}

// cniCall is one successful CNI ADD from the calico plugin's log.
type cniCall struct{ start, done time.Time }

var (
	cniLine   = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \[INFO\]\[\d+\] \S+ \d+: calico CNI plugin (called|done) `)
	cniAddArg = regexp.MustCompile(`command="ADD"`)
	cniCID    = regexp.MustCompile(`containerID="([0-9a-f]+)"`)
)

// parseCNILog reads, per container (sandbox) ID, its first successful ADD
// from the plugin's log (Calico's line format, in local time).
func parseCNILog(r io.Reader) map[string]cniCall {
	out := map[string]cniCall{}
	started := map[string]time.Time{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		m := cniLine.FindStringSubmatch(l)
		id := cniCID.FindStringSubmatch(l)
		if m == nil || id == nil || !cniAddArg.MatchString(l) {
			continue
		}
		t, err := time.ParseInLocation("2006-01-02 15:04:05.000", m[1], time.Local)
		if err != nil {
			continue
		}
		if _, seen := out[id[1]]; seen {
			continue
		}
		if m[2] == "called" {
			started[id[1]] = t
		} else if s, ok := started[id[1]]; ok {
			out[id[1]] = cniCall{start: s, done: t}
		}
	}
	return out
}

func TestParseBenchLogs(t *testing.T) {
	containerd := `time="2026-12-05T08:00:00.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:bgp-0,Uid:u1,Namespace:bench,Attempt:0,}"
time="2026-12-05T08:00:00.400000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:bgp-0,Uid:u1,Namespace:bench,Attempt:0,} returns sandbox id \"aa11\""
time="2026-12-05T08:00:00.410000000Z" level=info msg="CreateContainer within sandbox \"aa11\" for container &ContainerMetadata{Name:agnhost,Attempt:0,}"
time="2026-12-05T08:00:00.500000000Z" level=info msg="CreateContainer within sandbox \"aa11\" for &ContainerMetadata{Name:agnhost,Attempt:0,} returns container id \"cc22\""
time="2026-12-05T08:00:00.510000000Z" level=info msg="StartContainer for \"cc22\""
time="2026-12-05T08:00:00.700000000Z" level=info msg="StartContainer for \"cc22\" returns successfully"
`
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339Nano, "2026-12-05T08:00:"+s+"Z"); return t }
	got := parseContainerdLog(strings.NewReader(containerd))
	want := map[string]*sandboxTimes{"bgp-0": {id: "aa11", start: at("00.1"), done: at("00.4"), containerStart: at("00.7")}}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(sandboxTimes{})); d != "" {
		t.Errorf("containerd log (-want +got):\n%s", d)
	}
	cni := `2026-12-05 08:00:00.150 [INFO][42] cni-plugin/logging.go 41: calico CNI plugin called args="K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bgp-0" command="ADD" containerID="aa11" ifName="eth0" netns="/x"
2026-12-05 08:00:00.250 [INFO][42] cni-plugin/logging.go 52: calico CNI plugin done addresses="10.0.0.5/32" command="ADD" containerID="aa11" duration=100ms ifName="eth0"
2026-12-05 08:00:01.000 [INFO][43] cni-plugin/logging.go 41: calico CNI plugin called args="" command="DEL" containerID="aa11" ifName="eth0" netns="/x"
2026-12-05 08:00:01.100 [INFO][43] cni-plugin/logging.go 52: calico CNI plugin done command="DEL" containerID="aa11" duration=100ms ifName="eth0"
`
	local := func(s string) time.Time {
		t, _ := time.ParseInLocation("2006-01-02 15:04:05.000", "2026-12-05 08:00:"+s, time.Local)
		return t
	}
	gotCNI := parseCNILog(strings.NewReader(cni))
	wantCNI := map[string]cniCall{"aa11": {start: local("00.150"), done: local("00.250")}}
	if d := cmp.Diff(wantCNI, gotCNI, cmp.AllowUnexported(cniCall{})); d != "" {
		t.Errorf("CNI log (-want +got):\n%s", d)
	}
}
