{{/* Names and labels. */}}
{{- define "gantry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gantry.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gantry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gantry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Common labels. app.kubernetes.io/managed-by is Helm's: the controller's informers only
look at objects labeled managed-by=gantry, which are the runners' pods and Secrets.
*/}}
{{- define "gantry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gantry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gantry
{{- end }}

{{- define "gantry.serviceAccountName" -}}
{{- include "gantry.fullname" . }}
{{- end }}

{{- define "gantry.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The webhook Secret's name: the existing one, or the one the chart creates. */}}
{{- define "gantry.webhookSecretName" -}}
{{- .Values.webhook.secret.existingSecret | default (printf "%s-webhook" (include "gantry.fullname" .)) }}
{{- end }}

{{/* Leader election is on when asked, and always with more than one replica. */}}
{{- define "gantry.leaderElect" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicas) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/*
The namespaces the chart creates the GitHub credentials Secret in: those of the
RunnerPools that use it, since a pool reads its Secret from its own namespace.
*/}}
{{- define "gantry.githubSecretNamespaces" -}}
{{- $ns := .Values.github.secretNamespaces | default .Values.watchNamespaces }}
{{- if not $ns }}
{{- fail "github.secretNamespaces: with every namespace watched (watchNamespaces empty), list the namespaces of the RunnerPools that use the credentials Secret, e.g. --set 'github.secretNamespaces={ci}': a pool reads its Secret from its own namespace" }}
{{- end }}
{{- toJson (uniq $ns) }}
{{- end }}

{{/*
RBAC. The rules come from files/role.yaml, a copy of config/rbac/role.yaml, which
controller-gen generates from the markers in internal/controller/rbac.go (`make generate`
refreshes the copy; the install tests fail when it is stale). They are split by where
they are needed:

- gantry.watchRules: every generated rule except the Lease rules. They go into a
  ClusterRole when every namespace is watched, or into a Role in each watched namespace.
- gantry.leaderRules: what the controller needs in its own namespace, whatever it
  watches — the Lease rules (leader election), the events rules (leader election
  events), and reading the webhook Secret, by name only.

Together they grant exactly the generated rules, never more.
*/}}
{{- define "gantry.generatedRules" -}}
{{- $rules := list }}
{{- range regexSplit "(?m)^---\\s*$" (.Files.Get "files/role.yaml") -1 }}
{{- $doc := fromYaml . }}
{{- if eq (get $doc "kind") "ClusterRole" }}
{{- $rules = concat $rules (get $doc "rules" | default list) }}
{{- end }}
{{- end }}
{{- if not $rules }}
{{- fail "files/role.yaml has no ClusterRole rules: run `make generate`" }}
{{- end }}
{{- toJson $rules }}
{{- end }}

{{- define "gantry.watchRules" -}}
{{- $out := list }}
{{- range (include "gantry.generatedRules" . | fromJsonArray) }}
{{- $groups := without .apiGroups "coordination.k8s.io" }}
{{- if $groups }}
{{- $out = append $out (merge (dict "apiGroups" $groups) (omit . "apiGroups")) }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- define "gantry.leaderRules" -}}
{{- $out := list }}
{{- $secretVerbs := list }}
{{- range (include "gantry.generatedRules" . | fromJsonArray) }}
{{- if has "coordination.k8s.io" .apiGroups }}
{{- $out = append $out (dict "apiGroups" (list "coordination.k8s.io") "resources" .resources "verbs" .verbs) }}
{{- end }}
{{- $others := without .apiGroups "coordination.k8s.io" }}
{{- if and $others (has "events" .resources) }}
{{- $out = append $out (dict "apiGroups" $others "resources" (list "events") "verbs" .verbs) }}
{{- end }}
{{- if and (has "" .apiGroups) (has "secrets" .resources) (has "get" .verbs) (not .resourceNames) }}
{{- $secretVerbs = list "get" }}
{{- end }}
{{- end }}
{{- if $secretVerbs }}
{{- $out = append $out (dict "apiGroups" (list "") "resources" (list "secrets") "resourceNames" (list (include "gantry.webhookSecretName" .)) "verbs" $secretVerbs) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The runner NetworkPolicy, without a namespace: the controller applies it in every
namespace that holds RunnerPools.
*/}}
{{- define "gantry.runnerNetworkPolicy" -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "gantry.fullname" $ }}-runners
  labels:
    {{- include "gantry.labels" $ | nindent 4 }}
    app.kubernetes.io/component: runner-network-policy
spec:
  # Every runner pod Gantry creates: it carries these labels whatever its template says.
  podSelector:
    matchLabels:
      app.kubernetes.io/managed-by: gantry
    matchExpressions:
      - key: gantry.dev/runner
        operator: Exists
  policyTypes: [Ingress, Egress]
  # No ingress rule: nothing connects to a runner pod.
  egress:
    {{- with $.Values.networkPolicy.runners.egress }}
    {{- toYaml . | nindent 4 }}
    {{- else }}
    {{- $v4 := list }}
    {{- $v6 := list }}
    {{- range $.Values.networkPolicy.runners.deniedCIDRs }}
    {{- if contains ":" . }}{{ $v6 = append $v6 . }}{{ else }}{{ $v4 = append $v4 . }}{{ end }}
    {{- end }}
    # Pods of the cluster (DNS among them); the controller admits none of them.
    - to:
        - namespaceSelector: {}
    # Every address but the cloud metadata endpoints.
    - to:
        - ipBlock:
            cidr: 0.0.0.0/0
            {{- with $v4 }}
            except:
              {{- toYaml . | nindent 14 }}
            {{- end }}
        - ipBlock:
            cidr: ::/0
            {{- with $v6 }}
            except:
              {{- toYaml . | nindent 14 }}
            {{- end }}
    {{- end }}
{{- end }}

{{/*
The eviction webhook (docs/reliability.md#drains): its Service, its Secret, and the
serving certificate with the CA that signed it. The certificate is generated once per
render and kept in .Values under a private key, because the Secret, the
ValidatingWebhookConfiguration's caBundle and the Deployment's checksum annotation
must all see the same one. On an upgrade the Secret in the cluster is reused, so the
certificate does not change with every `helm upgrade`.
*/}}
{{- define "gantry.evictionWebhookService" -}}
{{- printf "%s-eviction-webhook" (include "gantry.fullname" .) }}
{{- end }}

{{- define "gantry.evictionWebhookSecret" -}}
{{- printf "%s-eviction-webhook-tls" (include "gantry.fullname" .) }}
{{- end }}

{{- define "gantry.evictionWebhookCert" -}}
{{- if not (hasKey .Values "__gantryEvictionWebhookCert") }}
{{- $cert := dict }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "gantry.evictionWebhookSecret" .) }}
{{- if and $existing $existing.data (hasKey $existing.data "ca.crt") (hasKey $existing.data "tls.crt") (hasKey $existing.data "tls.key") }}
{{- $cert = dict "ca" (index $existing.data "ca.crt") "crt" (index $existing.data "tls.crt") "key" (index $existing.data "tls.key") }}
{{- else }}
{{- $svc := include "gantry.evictionWebhookService" . }}
{{- $dns := list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) }}
{{- $ca := genCA (printf "%s-ca" $svc) 3650 }}
{{- $tls := genSignedCert (first $dns) nil $dns 3650 $ca }}
{{- $cert = dict "ca" ($ca.Cert | b64enc) "crt" ($tls.Cert | b64enc) "key" ($tls.Key | b64enc) }}
{{- end }}
{{- $_ := set .Values "__gantryEvictionWebhookCert" $cert }}
{{- end }}
{{- toJson (get .Values "__gantryEvictionWebhookCert") }}
{{- end }}

{{/*
The namespaces whose evictions the webhook sees: evictionWebhook.namespaceSelector
when set; else the watched namespaces; else every namespace.
*/}}
{{- define "gantry.evictionWebhookNamespaceSelector" -}}
{{- $sel := .Values.evictionWebhook.namespaceSelector }}
{{- if and (not $sel) .Values.watchNamespaces }}
{{- $sel = dict "matchExpressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" (uniq .Values.watchNamespaces))) }}
{{- end }}
{{- toYaml (default dict $sel) }}
{{- end }}
