// The toy model's reference (examples/toy-model/toy_model.py) in JavaScript, over the generic
// layout: `--impl 'exec:node examples/node-toy/toy.js'` under `model = "toy"`.
// `node toy.js ties-by-arrival` plants the toy optimized's bug (ties to the earlier arrival).
"use strict";
const { serve } = require("./protocol.js");

const byArrival = process.argv[2] === "ties-by-arrival";

class Reference {
  constructor(scenario) {
    this.waiting = new Map(); // job -> [size, arrival order]
    this.plans = 0;
    this.arrived = 0;
  }
  arrive(job, size, now) {
    this.waiting.set(job, [size, this.arrived++]);
  }
  plan(now) {
    this.plans += 1;
    let pick = null;
    for (const [job, [size, order]] of this.waiting) {
      if (pick === null) { pick = job; continue; }
      const [best, bestOrder] = this.waiting.get(pick);
      const tie = byArrival ? order < bestOrder : job < pick;
      if (size < best || (size === best && tie)) pick = job;
    }
    this.waiting.delete(pick);
    return { t: "plan", plan: this.plans, now, pick, left: this.waiting.size };
  }
  complete(job, now) {
    return null;
  }
  state() {
    return { waiting: [...this.waiting].map(([job, [size]]) => [job, size]).sort((a, b) => a[0] - b[0]) };
  }
}

serve("toy", (scenario) => new Reference(scenario), byArrival ? "node-ties-by-arrival" : "node-reference");
