// Validates Kubernetes objects against the Kubernetes schemas (npm kubernetes-models), and
// JobSets against the JobSet CRD's schema beside this file (ajv), offline:
//   kubectl kustomize deploy/k8s/overlays/cpu | node validate.mjs
// Reads YAML documents from stdin (or the files named), prints one line per object, and exits 1
// naming the object and the field when one is invalid, or when its kind is unknown.
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import { parse, parseAllDocuments } from "yaml";

// The CRDs vendored here, by "group/version" and kind: their openAPIV3Schema, compiled.
const crds = {};
for (const file of ["jobset.x-k8s.io_jobsets.yaml"]) {
  const crd = parse(readFileSync(new URL(file, import.meta.url), "utf8"));
  // Kubernetes' integer formats are checked; the others (date-time, ...) only appear in status.
  const ajv = new Ajv({ strict: false, logger: false });
  ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && Math.abs(n) < 2 ** 31 });
  ajv.addFormat("int64", { type: "number", validate: (n) => Number.isInteger(n) });
  for (const version of crd.spec.versions) {
    crds[`${crd.spec.group}/${version.name}/${crd.spec.names.kind}`] =
      ajv.compile(version.schema.openAPIV3Schema);
  }
}

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
    const crd = crds[`${apiVersion}/${kind}`];
    if (crd) {
      if (crd(object)) {
        console.log(`ok ${apiVersion} ${name}`);
      } else {
        const e = crd.errors[0];
        console.error(`${name}: ${e.instancePath || "/"} ${e.message}`);
        failed++;
      }
      continue;
    }
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
