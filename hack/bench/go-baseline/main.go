// The Go-shaped baseline of hack/bench.sh: a net/http TLS server doing the webhook's job the way
// a typical Go webhook does it (decode the AdmissionReview into generic JSON, find the pod's
// annotations, volumes and containers, build the JSON patch, base64 it, encode the response),
// so shmguard's server can be compared with it side by side in one run.
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"strings"
)

type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    struct {
		UID    string                 `json:"uid"`
		Object map[string]interface{} `json:"object"`
	} `json:"request"`
}

func escape(k string) string { return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1") }

func patchFor(pod map[string]interface{}) []map[string]interface{} {
	var ops []map[string]interface{}
	md, _ := pod["metadata"].(map[string]interface{})
	ann, _ := md["annotations"].(map[string]interface{})
	size := "8Gi"
	if ann == nil {
		ops = append(ops, map[string]interface{}{"op": "add", "path": "/metadata/annotations",
			"value": map[string]string{"shmguard.io/injected-size": size}})
	} else {
		ops = append(ops, map[string]interface{}{"op": "add", "path": "/metadata/annotations/" + escape("shmguard.io/injected-size"), "value": size})
	}
	spec, _ := pod["spec"].(map[string]interface{})
	vol := map[string]interface{}{"name": "shmguard-dshm", "emptyDir": map[string]string{"medium": "Memory", "sizeLimit": size}}
	if _, ok := spec["volumes"].([]interface{}); ok {
		ops = append(ops, map[string]interface{}{"op": "add", "path": "/spec/volumes/-", "value": vol})
	} else {
		ops = append(ops, map[string]interface{}{"op": "add", "path": "/spec/volumes", "value": []interface{}{vol}})
	}
	containers, _ := spec["containers"].([]interface{})
	for i, c := range containers {
		cm, _ := c.(map[string]interface{})
		mount := map[string]string{"name": "shmguard-dshm", "mountPath": "/dev/shm"}
		p := "/spec/containers/" + itoa(i) + "/volumeMounts"
		if _, ok := cm["volumeMounts"].([]interface{}); ok {
			ops = append(ops, map[string]interface{}{"op": "add", "path": p + "/-", "value": mount})
		} else {
			ops = append(ops, map[string]interface{}{"op": "add", "path": p, "value": []interface{}{mount}})
		}
	}
	return ops
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	cert := flag.String("cert", "", "tls.crt")
	key := flag.String("key", "", "tls.key")
	flag.Parse()
	http.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) {
		var rv review
		if err := json.NewDecoder(r.Body).Decode(&rv); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		patch, _ := json.Marshal(patchFor(rv.Request.Object))
		resp := map[string]interface{}{"apiVersion": rv.APIVersion, "kind": "AdmissionReview",
			"response": map[string]interface{}{"uid": rv.Request.UID, "allowed": true, "patchType": "JSONPatch",
				"patch": base64.StdEncoding.EncodeToString(patch)}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	})
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}
