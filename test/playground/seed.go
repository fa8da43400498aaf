package playground

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// seed creates the pool file's Private Networks, with its IDs, in the
// emulator: each with the subnets its pools name, or one chosen for it.
func seed(emu *emulator.Server, cfg *ipam.Config) error {
	subnets := map[string][]string{cfg.ClusterPrivateNetworkID: nil}
	order := []string{cfg.ClusterPrivateNetworkID}
	for _, p := range cfg.Pools {
		if _, ok := subnets[p.PrivateNetworkID]; !ok {
			order = append(order, p.PrivateNetworkID)
		}
		if p.Subnet != "" && !strings.Contains(strings.Join(subnets[p.PrivateNetworkID], ","), p.Subnet) {
			subnets[p.PrivateNetworkID] = append(subnets[p.PrivateNetworkID], p.Subnet)
		}
	}
	for i, id := range order {
		name := "nodes"
		if i > 0 {
			name = "pn-" + strconv.Itoa(i)
		}
		if _, err := emu.AddPrivateNetworkWithID(id, name, subnets[id]...); err != nil {
			return err
		}
	}
	return nil
}

// renderChart renders the chart with the pool file and returns its objects
// and the Deployment's container arguments.
func renderChart(ctx context.Context, root, tmp string, poolData []byte) ([]*unstructured.Unstructured, []string, error) {
	var config map[string]any
	if err := yaml.Unmarshal(poolData, &config); err != nil {
		return nil, nil, err
	}
	values, err := yaml.Marshal(map[string]any{"config": config, "scaleway": map[string]any{"existingSecret": "scaleway-secret"}})
	if err != nil {
		return nil, nil, err
	}
	valuesFile := filepath.Join(tmp, "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		return nil, nil, err
	}
	out, err := testenv.HelmCommand(ctx, filepath.Join(root, "bin", "helm"), filepath.Join(tmp, "helm"), "template", release, filepath.Join(root, "charts", "scw-lb-ipam"),
		"--namespace", Namespace, "--values", valuesFile, "--skip-tests").Output() // helm test's objects exist only while it runs
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, nil, fmt.Errorf("helm template: %s", ee.Stderr)
		}
		return nil, nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	var objs []*unstructured.Unstructured
	var args []string
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
		if u.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, a := range containers[0].(map[string]any)["args"].([]any) {
				args = append(args, fmt.Sprint(a))
			}
		}
	}
	if len(args) == 0 {
		return nil, nil, errors.New("the chart rendered no Deployment arguments")
	}
	return objs, args, nil
}
