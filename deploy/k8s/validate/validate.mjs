// Validates Kubernetes objects against the Kubernetes schemas (npm kubernetes-models), offline:
//   kubectl kustomize deploy/k8s/overlays/cpu | node validate.mjs
// Reads YAML documents from stdin (or the files named), prints one line per object, and exits 1
// naming the object and the field when one is invalid, or when its kind is unknown.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const texts = process.argv.length > 2
  ? process.argv.slice(2).map((f) => readFileSync(f, "utf8"))
  : [readFileSync(0, "utf8")];
let failed = 0;
let count = 0;
for (const text of texts) {
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) {
      console.error(`YAML error: ${doc.errors[0].message}`);
      failed++;
      continue;
    }
    const object = doc.toJS();
    if (object == null) continue;
    count++;
    const { apiVersion, kind } = object;
    const name = `${kind} ${object.metadata?.name ?? "(no name)"}`;
    // "apps/v1" -> kubernetes-models/apps/v1/Kind; "v1" -> kubernetes-models/v1/Kind
    let Model;
    try {
      Model = (await import(`kubernetes-models/${apiVersion}/${kind}`))[kind];
    } catch {
      console.error(`${name}: unknown apiVersion/kind ${apiVersion}/${kind}`);
      failed++;
      continue;
    }
    try {
      new Model(object).validate();
      console.log(`ok ${apiVersion} ${name}`);
    } catch (e) {
      console.error(`${name}: ${e.message}`);
      failed++;
    }
  }
}
console.log(`${count} objects, ${failed} invalid`);
process.exit(failed || count === 0 ? 1 : 0);
