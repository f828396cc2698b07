package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/multas/aggregator/config"
)

// kustomization is the part of kustomize's Kustomization that the base
// uses; decoding it strictly refuses any other field, so a field added to
// the file must be added here, and checked.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
		IncludeTemplates bool              `json:"includeTemplates"`
	} `json:"labels"`
	Resources []string         `json:"resources"`
	Images    []kustomizeImage `json:"images"`
}

// kustomizeImage sets the image of the containers that name Name.
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
	Digest  string `json:"digest"`
}

// kube is the kustomize base, every manifest decoded into its API type.
type kube struct {
	kustomization kustomization
	deployment    *appsv1.Deployment
	service       *corev1.Service
	configMap     *corev1.ConfigMap
	pdb           *policyv1.PodDisruptionBudget
	hpa           *autoscalingv2.HorizontalPodAutoscaler
	secret        *corev1.Secret // secret.example.yaml, not a resource
}

const kubeDir = "kubernetes"

// decodeStrict decodes one YAML document into v as the API server's
// strict field validation does: YAML to JSON refusing duplicate keys, then
// JSON with case-sensitive field names, refusing unknown and duplicate
// fields (encoding/json alone would take `readinessprobe` for
// `readinessProbe`).
func decodeStrict(data []byte, v any) error {
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "---" {
			return fmt.Errorf("several YAML documents: keep one manifest per file")
		}
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// manifest decodes a Kubernetes manifest into the type of its apiVersion
// and kind.
func manifest(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	default:
		return nil, fmt.Errorf("apiVersion %q kind %q: not a type this base uses", tm.APIVersion, tm.Kind)
	}
	if err := decodeStrict(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// loadKube reads the base: the kustomization, then every resource it
// lists, each exactly once.
func loadKube(t *testing.T) kube {
	t.Helper()
	var k kube
	if err := decodeStrict(read(t, "deploy", kubeDir, "kustomization.yaml"), &k.kustomization); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	set := func(file string, obj any) {
		var dup bool
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dup, k.deployment = k.deployment != nil, o
		case *corev1.Service:
			dup, k.service = k.service != nil, o
		case *corev1.ConfigMap:
			dup, k.configMap = k.configMap != nil, o
		case *policyv1.PodDisruptionBudget:
			dup, k.pdb = k.pdb != nil, o
		case *autoscalingv2.HorizontalPodAutoscaler:
			dup, k.hpa = k.hpa != nil, o
		default:
			t.Errorf("%s: a %T is not a resource of the base", file, obj)
		}
		if dup {
			t.Errorf("%s: a second %T", file, obj)
		}
	}
	for _, r := range k.kustomization.Resources {
		obj, err := manifest(read(t, "deploy", kubeDir, r))
		if err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		set(r, obj)
	}
	obj, err := manifest(read(t, "deploy", kubeDir, "secret.example.yaml"))
	if err != nil {
		t.Fatalf("secret.example.yaml: %v", err)
	}
	s, ok := obj.(*corev1.Secret)
	if !ok {
		t.Fatalf("secret.example.yaml is a %T, want a Secret", obj)
	}
	k.secret = s
	if k.deployment == nil || k.service == nil || k.configMap == nil || k.pdb == nil || k.hpa == nil {
		t.Fatalf("the base lacks one of Deployment, Service, ConfigMap, PodDisruptionBudget, HorizontalPodAutoscaler")
	}
	return k
}

// TestKustomization: the kustomization lists every manifest of the folder
// (but the example Secret, which must not be applied), each once, each
// existing.
func TestKustomization(t *testing.T) {
	t.Parallel()
	var kz kustomization
	if err := decodeStrict(read(t, "deploy", kubeDir, "kustomization.yaml"), &kz); err != nil {
		t.Fatal(err)
	}
	if kz.APIVersion != "kustomize.config.k8s.io/v1beta1" || kz.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: %s %s", kz.APIVersion, kz.Kind)
	}
	entries, err := os.ReadDir(path("deploy", kubeDir))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "kustomization.yaml" || strings.HasSuffix(name, ".example.yaml") {
			continue
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			want = append(want, name)
		} else if ext != ".md" {
			t.Errorf("%s: not a manifest, nor documentation: what is it for?", name)
		}
	}
	got := slices.Clone(kz.Resources)
	slices.Sort(got)
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("resources %q: listed twice", kz.Resources)
	}
	if !slices.Equal(got, want) {
		t.Errorf("resources %q, want every manifest of the folder %q", got, want)
	}
	if slices.ContainsFunc(kz.Resources, func(r string) bool { return strings.Contains(r, "secret") }) {
		t.Errorf("resources %q: secrets are not committed", kz.Resources)
	}
}

// TestManifestsStrict: a field the API does not know is refused, as
// kubectl --validate=strict would.
func TestManifestsStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, want string
	}{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {selectr: {a: b}}\n", "unknown field"},
		{"misplaced field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {template: {spec: {containers: [{name: a, readinessprobe: {}}]}}}\n", "unknown field"},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b}\ndata: {c: d}\n", "already set"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n", "not a type"},
		{"old API", "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: a}\n", "not a type"},
		{"two documents", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n", "several"},
		{"wrong case", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {Selector: {a: b}}\n", "unknown field"},
		{"string for a number", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: \"3\"}\n", "cannot unmarshal"},
		{"number for a string", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {template: {metadata: {annotations: {a: 1}}}}\n", "cannot unmarshal"},
		{"valid", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {selector: {a: b}}\n", ""},
	}
	for _, tt := range tests {
		_, err := manifest([]byte(tt.doc))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

// TestDeployment: probes, resources, restricted security context, the
// grace period of the shutdown sequence, the config mount and the Secret
// references.
func TestDeployment(t *testing.T) {
	t.Parallel()
	k := loadKube(t)
	d := k.deployment
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	if d.Spec.Selector == nil || !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("selector %v does not select the template's labels %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d: the HorizontalPodAutoscaler owns the count", *d.Spec.Replicas)
	}

	// The image is the one the kustomization sets.
	if !slices.ContainsFunc(k.kustomization.Images, func(i kustomizeImage) bool { return i.Name == c.Image }) {
		t.Errorf("image %q is not set by the kustomization's images", c.Image)
	}

	// Probes: readiness on /readyz (503 from SIGTERM on), liveness and
	// startup on /healthz, on the container's named port.
	port := containerPort(t, c, "http")
	probe := func(name string, p *corev1.Probe, wantPath string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET of %s", name, wantPath)
			return
		}
		if p.HTTPGet.Path != wantPath {
			t.Errorf("%s probe path %q, want %q", name, p.HTTPGet.Path, wantPath)
		}
		if p.HTTPGet.Port != intstr.FromString("http") && p.HTTPGet.Port != intstr.FromInt32(port) {
			t.Errorf("%s probe port %v, want the http port", name, p.HTTPGet.Port.String())
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	if c.StartupProbe != nil {
		probe("startup", c.StartupProbe, "/healthz")
	}
	// Out of rotation within the shutdown delay (5s) after SIGTERM.
	if r := c.ReadinessProbe; r != nil && r.PeriodSeconds*r.FailureThreshold >= 5 {
		t.Errorf("readiness: %ds × %d failures: the replica would leave the Service after server.shutdown_delay (5s)", r.PeriodSeconds, r.FailureThreshold)
	}

	// Resources: requests and limits for CPU and memory, requests within
	// the limits.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[name]
		lim, okLim := c.Resources.Limits[name]
		if !okReq || !okLim {
			t.Errorf("resources: want a request and a limit of %s", name)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("resources: %s request %s above its limit %s", name, req.String(), lim.String())
		}
	}

	// The restricted Pod Security Standard.
	psc := pod.SecurityContext
	csc := c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("want a pod and a container securityContext")
	}
	if !isTrue(psc.RunAsNonRoot) && !isTrue(csc.RunAsNonRoot) {
		t.Error("runAsNonRoot: want true")
	}
	if uid := psc.RunAsUser; uid == nil || *uid == 0 {
		t.Errorf("runAsUser %s: want the image's non-root user", fmtPtr(psc.RunAsUser))
	} else if want := dockerfileUID(t); *uid != want {
		t.Errorf("runAsUser %d, want the Dockerfile's USER %d", *uid, want)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation: want false")
	}
	if !isTrue(csc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem: want true")
	}
	if isTrue(csc.Privileged) {
		t.Error("privileged: want false")
	}
	if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v: want drop [ALL], add nothing", csc.Capabilities)
	}
	seccomp := csc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v: want RuntimeDefault", seccomp)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken: want false (the aggregator does not call the API server)")
	}

	// SIGTERM: shutdown_delay (5s) + shutdown_timeout (15s) before SIGKILL.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 5+15 {
		t.Errorf("terminationGracePeriodSeconds %s: want more than server.shutdown_delay + server.shutdown_timeout (20s)", fmtPtr(g))
	}

	// The configuration: the ConfigMap's aggregator.yaml at the path the
	// command reads.
	cfgPath := "/etc/aggregator/aggregator.yaml"
	if args := strings.Join(c.Args, " "); args != "" && args != "-config "+cfgPath {
		t.Errorf("args %q: want none (the image's CMD) or -config %s", c.Args, cfgPath)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		v := volume(pod, m.Name)
		if v == nil {
			t.Errorf("volumeMount %s: no such volume", m.Name)
			continue
		}
		if v.ConfigMap != nil && v.ConfigMap.Name == k.configMap.Name {
			if _, ok := k.configMap.Data[strings.TrimPrefix(cfgPath, m.MountPath+"/")]; ok && m.ReadOnly {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s with aggregator.yaml not mounted read-only at %s", k.configMap.Name, cfgPath)
	}

	// Every variable of the configuration is set, secrets from the Secret
	// by reference, and the Secret example has exactly those keys.
	conf := []byte(k.configMap.Data["aggregator.yaml"])
	secretKeys := map[string]bool{}
	for _, name := range envRefs(conf) {
		e := envVar(c, name)
		if e == nil {
			t.Errorf("the configuration refers to ${%s}, which the container does not set", name)
			continue
		}
		if e.Value != "" {
			t.Errorf("env %s: a literal value; secrets come from a secretKeyRef", name)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil || ref.Name != k.secret.Name {
			t.Errorf("env %s: want a secretKeyRef to %s", name, k.secret.Name)
			continue
		}
		secretKeys[ref.Key] = true
	}
	for key := range secretKeys {
		if _, ok := k.secret.StringData[key]; !ok {
			t.Errorf("secret.example.yaml has no key %q, which the Deployment reads", key)
		}
	}
	for key := range k.secret.StringData {
		if !secretKeys[key] {
			t.Errorf("secret.example.yaml: key %q is read by no variable of the configuration", key)
		}
	}
	for _, name := range []string{"AGGREGATOR_ADMIN_TOKEN", "WEBHOOK_SECRET"} {
		if e := envVar(c, name); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s: want a secretKeyRef", name)
		}
	}
}

// TestKubernetesConfig: the ConfigMap's aggregator.yaml passes our own
// validation, listens on the container's port, and keeps secrets out.
func TestKubernetesConfig(t *testing.T) {
	t.Parallel()
	k := loadKube(t)
	data, ok := k.configMap.Data["aggregator.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no aggregator.yaml", k.configMap.Name)
	}
	cfg, err := config.Parse([]byte(data), "configmap.yaml#aggregator.yaml", getenv(t))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	port := containerPort(t, k.deployment.Spec.Template.Spec.Containers[0], "http")
	if want := fmt.Sprintf("0.0.0.0:%d", port); cfg.Server.Listen != want {
		t.Errorf("server.listen %q, want %q (the container port, on every interface)", cfg.Server.Listen, want)
	}
	if cfg.Server.AdminToken != testEnv["AGGREGATOR_ADMIN_TOKEN"] || cfg.Webhooks.SigningSecret != testEnv["WEBHOOK_SECRET"] {
		t.Error("admin_token and signing_secret: want them from the environment")
	}
	if cfg.Store.RedisURL == "" {
		t.Error("store.redis_url: the replicas share state through Redis")
	}
	for name, v := range testEnv {
		if strings.Contains(data, v) {
			t.Errorf("the ConfigMap holds the value of %s in clear", name)
		}
	}
}

// TestServicePDBHPA: the Service, PodDisruptionBudget and autoscaler
// select the Deployment's pods and leave replicas serving.
func TestServicePDBHPA(t *testing.T) {
	t.Parallel()
	k := loadKube(t)
	podLabels := k.deployment.Spec.Template.Labels
	c := k.deployment.Spec.Template.Spec.Containers[0]

	if len(k.service.Spec.Selector) == 0 || !subset(k.service.Spec.Selector, podLabels) {
		t.Errorf("Service selector %v does not select the pods %v", k.service.Spec.Selector, podLabels)
	}
	if len(k.service.Spec.Ports) == 0 {
		t.Error("Service: no port")
	}
	for _, p := range k.service.Spec.Ports {
		if p.TargetPort != intstr.FromString("http") && p.TargetPort != intstr.FromInt32(containerPort(t, c, "http")) {
			t.Errorf("Service port %s: targetPort %s, want the container's http port", p.Name, p.TargetPort.String())
		}
	}

	sel := k.pdb.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 || !subset(sel.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", sel, podLabels)
	}
	if (k.pdb.Spec.MaxUnavailable == nil) == (k.pdb.Spec.MinAvailable == nil) {
		t.Error("PodDisruptionBudget: want exactly one of maxUnavailable, minAvailable")
	}

	ref := k.hpa.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != k.deployment.Name {
		t.Errorf("HorizontalPodAutoscaler targets %+v, want the Deployment %s", ref, k.deployment.Name)
	}
	minReplicas := int32(1)
	if k.hpa.Spec.MinReplicas != nil {
		minReplicas = *k.hpa.Spec.MinReplicas
	}
	if minReplicas < 2 || k.hpa.Spec.MaxReplicas < minReplicas {
		t.Errorf("HorizontalPodAutoscaler min %d max %d: want at least 2, max ≥ min", minReplicas, k.hpa.Spec.MaxReplicas)
	}
	// A drain never leaves fewer than two replicas serving.
	if mu := k.pdb.Spec.MaxUnavailable; mu != nil && (mu.Type != intstr.Int || minReplicas-mu.IntVal < 2) {
		t.Errorf("PodDisruptionBudget maxUnavailable %s with %d replicas: want two left", mu.String(), minReplicas)
	}
	for _, m := range k.hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil {
			if _, ok := c.Resources.Requests[m.Resource.Name]; !ok {
				t.Errorf("HorizontalPodAutoscaler scales on %s utilisation, which the container does not request", m.Resource.Name)
			}
		}
	}
	if len(k.hpa.Spec.Metrics) == 0 {
		t.Error("HorizontalPodAutoscaler: no metric")
	}
}

func subset(sub, set map[string]string) bool {
	for k, v := range sub {
		if set[k] != v {
			return false
		}
	}
	return true
}

// fmtPtr formats *p, or "unset".
func fmtPtr[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func isTrue(b *bool) bool { return b != nil && *b }

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s: no port named %s", c.Name, name)
	return 0
}

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}
