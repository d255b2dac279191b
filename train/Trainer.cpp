// nnc::Trainer: builds the train-step graph (loss, gradients, optimizer update) and runs it.
#include "nnc/train/Trainer.h"

#include <algorithm>
#include <set>

#include "nnc/passes/Specialize.h"
#include "nnc/runtime/OpenCL.h"

namespace nnc {

Expected<LossKind> parseLoss(const std::string &name) {
  if (name == "softmax_cross_entropy")
    return LossKind::SoftmaxCrossEntropy;
  if (name == "mse")
    return LossKind::MeanSquaredError;
  return makeError("unknown loss '{}' (softmax_cross_entropy or mse)", name);
}

Expected<OptimizerKind> parseOptimizer(const std::string &name) {
  static const std::map<std::string, OptimizerKind> kinds = {
      {"sgd", OptimizerKind::Sgd},           {"momentum", OptimizerKind::Momentum},
      {"nesterov", OptimizerKind::Nesterov}, {"adam", OptimizerKind::Adam},
      {"adamw", OptimizerKind::AdamW},       {"adagrad", OptimizerKind::Adagrad}};
  auto it = kinds.find(name);
  if (it == kinds.end())
    return makeError("unknown optimizer '{}' (sgd, momentum, nesterov, adam, adamw or adagrad)",
                     name);
  return it->second;
}

namespace {

/// How many state tensors per parameter an optimizer keeps.
int stateCount(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::Sgd:
    return 0;
  case OptimizerKind::Momentum:
  case OptimizerKind::Nesterov:
  case OptimizerKind::Adagrad:
    return 1;
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    return 2;
  }
  return 0;
}

/// Appends the update of one parameter; returns {x', state'...}.
std::vector<Value *> update(GradEmitter &e, const TrainOptions &o, Value *lr, Value *t, Value *x,
                            Value *g, const std::vector<Value *> &state) {
  switch (o.optimizer) {
  case OptimizerKind::Sgd:
    return {sgdUpdate(e, lr, x, g)};
  case OptimizerKind::Momentum:
  case OptimizerKind::Nesterov: {
    MomentumOptions m{o.momentum, 1.0, 0, o.optimizer == OptimizerKind::Nesterov};
    auto r = momentumUpdate(e, lr, t, x, g, state[0], m);
    return {r[0], r[1]};
  }
  case OptimizerKind::Adagrad: {
    auto r = adagradUpdate(e, lr, t, x, g, state[0], o.adagrad);
    return {r[0], r[1]};
  }
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW: {
    AdamOptions a = o.adam;
    if (o.optimizer == OptimizerKind::AdamW)
      a.normCoefficientPost = o.lr * o.weightDecay;
    auto r = adamUpdate(e, lr, t, x, g, state[0], state[1], a);
    return {r[0], r[1], r[2]};
  }
  }
  return {};
}

/// The float Constant node behind `v` (directly or through a Cast), or null.
Node *constantBehind(Value *v) {
  Node *p = v->producer();
  if (p && p->kind() == OpKind::Cast)
    p = p->operand(0)->producer();
  return p && p->kind() == OpKind::Constant && isFloat(p->result(0)->dtype()) ? p : nullptr;
}

/// The batch norms whose mean and var are constants: the ones the train step switches to
/// batch statistics, whose constants become running statistics. Fails where such a constant
/// has another use (PyTorch's eval-mode export merges equal initializers, say a fresh
/// running_var with its batch norm's scale): updating one would change the other.
Expected<std::vector<Node *>> trainableBatchNorms(const Graph &g) {
  std::vector<Node *> out;
  for (Node *n : g.nodes()) {
    if (n->kind() != OpKind::BatchNorm || !constantBehind(n->operand(3)) ||
        !constantBehind(n->operand(4)))
      continue;
    for (int k : {3, 4}) {
      Value *v = n->operand(k), *c = constantBehind(v)->result(0);
      const std::vector<Value *> &ops = n->operands();
      bool sole = g.users(v) == std::vector<Node *>{n} && !g.isOutput(v) &&
                  std::count(ops.begin(), ops.end(), v) == 1 &&
                  (v == c || (g.users(c).size() == 1 && !g.isOutput(c)));
      NNC_USER_CHECK(sole,
                     "batch norm '{}': its running {} '{}' is used elsewhere too (an "
                     "exporter merged equal initializers; PyTorch's export in training mode, "
                     "training=TrainingMode.TRAINING, keeps them apart)",
                     n->name(), k == 3 ? "mean" : "variance", c->name());
    }
    out.push_back(n);
  }
  return out;
}

Tensor scalarTensor(DType t, double v) {
  Tensor s = Tensor::zeros(t, {});
  if (t == DType::F64)
    *s.data<double>() = v;
  else if (t == DType::F32)
    *s.data<float>() = static_cast<float>(v);
  else if (t == DType::I64)
    *s.data<int64_t>() = static_cast<int64_t>(v);
  return s;
}

} // namespace

Expected<std::unique_ptr<Trainer>>
Trainer::create(const Graph &model, const std::vector<std::string> &params, const TrainOptions &o) {
  std::unique_ptr<Trainer> tr(new Trainer(o));
  NNC_USER_CHECK(o.batch > 0, "the batch size must be positive, got {}", o.batch);
  NNC_USER_CHECK(!model.outputs().empty(), "the model has no output");
  std::unique_ptr<Graph> g = model.clone();
  // The random ops' counter, an input beside the batch until step 3 feeds it the step count.
  Value *counterIn = g->findValue(kStepCounterInput);
  bool hasCounter = counterIn && counterIn->isGraphInput() && g->inputs()[0] != counterIn;
  NNC_USER_CHECK(g->inputs().size() == 1 + hasCounter,
                 "the model must have one input (the batch), it has {} (initializers aside)",
                 g->inputs().size() - hasCounter);

  // 1. The parameters become graph inputs (before any folding could fold them away). None
  // named: every float constant of rank >= 1 (a GraphBuilder graph's weights; the scalars
  // that ops bring, such as relu's 0, stay constants). Batch norms' means and variances are
  // running statistics, not parameters (step 3 updates them).
  std::set<std::string> running;
  NNC_ASSIGN_OR_RETURN(std::vector<Node *> batchNorms, trainableBatchNorms(*g));
  for (Node *bn : batchNorms)
    for (int k : {3, 4})
      running.insert(constantBehind(bn->operand(k))->result(0)->name());
  std::vector<std::string> names = params;
  if (names.empty())
    for (const Node *n : g->nodes())
      if (n->kind() == OpKind::Constant && isFloat(n->result(0)->dtype()) &&
          n->result(0)->type().rank() >= 1)
        names.push_back(n->result(0)->name());
  std::vector<Tensor> initial;
  for (const std::string &name : names) {
    Value *v = g->findValue(name);
    Node *p = v ? v->producer() : nullptr;
    if (!p || p->kind() != OpKind::Constant || !isFloat(v->dtype()) || running.count(name))
      continue; // integer initializers (shapes, indices) are not trained
    NNC_USER_CHECK(v->dtype() == DType::F32 || v->dtype() == DType::F64,
                   "parameter '{}' is {}: training supports f32 and f64", name, v->type().str());
    initial.push_back(p->getTensor("value"));
    g->renameValue(v, name + ".initial");
    Value *in = g->addInput(name, v->type());
    g->replaceAllUsesWith(v, in);
    g->eraseNode(p);
    tr->paramNames_.push_back(in->name());
  }
  NNC_USER_CHECK(!initial.empty(), "the model has no float initializers to train");
  tr->dtype_ = initial[0].dtype();

  // 2. Static shapes for this batch size.
  const TensorType &xt = g->inputs()[0]->type();
  NNC_USER_CHECK(xt.rank() >= 1, "the model's input {} has no batch dimension", xt.str());
  Extents xe = {o.batch};
  for (int64_t i = 1; i < xt.rank(); ++i) {
    const Dim &d = xt.shape[static_cast<size_t>(i)];
    NNC_USER_CHECK(d.isStatic(), "the model's input {} must be static but for its batch dim",
                   xt.str());
    xe.push_back(d.value());
  }
  NNC_USER_CHECK(xt.shape[0].isSymbolic() || xt.shape[0].value() == o.batch,
                 "the model's input {} has a fixed batch of {}, not {}", xt.str(),
                 xt.shape[0].value(), o.batch);
  std::vector<Extents> shapes = {xe};
  if (hasCounter)
    shapes.push_back({});
  for (const Tensor &t : initial)
    shapes.push_back(t.extents());
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> sg,
                       specializeShapes(*g, shapes, driver::interpreterEvaluator()));
  tr->inputType_ = TensorType(xt.dtype, shapeFromExtents(xe));

  // 3. Loss, gradients and updates, appended to the forward graph.
  std::vector<Value *> paramValues(sg->inputs().begin() + 1 + hasCounter, sg->inputs().end());
  Value *pred = sg->outputs()[0];
  NNC_USER_CHECK(pred->dtype() == tr->dtype_, "the model's output is {}, its parameters {}",
                 pred->type().str(), dtypeName(tr->dtype_));
  if (o.loss == LossKind::SoftmaxCrossEntropy) { // [N, d1..] for logits [N, C, d1..]
    NNC_USER_CHECK(pred->rank() >= 2,
                   "the softmax cross-entropy loss needs logits [N, C, d1..], "
                   "the model gives {}",
                   pred->type().str());
    Shape ls = {Dim(o.batch)};
    for (int64_t i = 2; i < pred->rank(); ++i)
      ls.push_back(pred->shape()[static_cast<size_t>(i)]);
    tr->labelType_ = TensorType(DType::I64, ls);
  } else {
    tr->labelType_ = pred->type();
  }
  Value *labels = sg->addInput("labels", tr->labelType_);
  Value *lr = sg->addInput("lr", TensorType(tr->dtype_, {}));
  Value *step = sg->addInput("step", TensorType(DType::I64, {}));
  GradEmitter e(*sg);
  if (hasCounter) {
    // The seed moves every step's counter to its own sequence.
    Value *counter = sg->findValue(kStepCounterInput);
    Tensor key = Tensor::scalar<int64_t>(DType::I64, static_cast<int64_t>(splitMix64(o.seed)));
    sg->replaceAllUsesWith(counter, e.op(OpKind::BitXor, {step, e.constant(key)}));
    sg->removeInput(counter);
  }
  // Batch norms train with batch statistics (PyTorch's train() mode); their running
  // statistics, still constants here, become state after the optimizer's.
  std::vector<std::pair<Node *, Value *>> runningUpdates; // (constant, its update)
  NNC_ASSIGN_OR_RETURN(batchNorms, trainableBatchNorms(*sg));
  for (Node *bn : batchNorms) {
    Node *mean = constantBehind(bn->operand(3)), *var = constantBehind(bn->operand(4));
    // Absent (a GraphBuilder batch norm): ONNX's default, PyTorch's momentum 0.1.
    double momentum = bn->hasAttr("momentum") ? bn->getFloat("momentum") : 0.9;
    std::array<Value *, 3> r =
        batchNormTraining(e, bn->operand(0), bn->operand(1), bn->operand(2), mean->result(0),
                          var->result(0), bn->getFloat("epsilon"), momentum);
    if (!e.ok())
      return e.error().withContext(fmt::format("batch norm '{}'", bn->name()));
    sg->replaceAllUsesWith(bn->result(0), r[0]);
    sg->eraseNode(bn);
    runningUpdates.push_back({mean, r[1]});
    runningUpdates.push_back({var, r[2]});
  }
  NNC_TRY(sg->topologicalSort());
  Value *loss = o.loss == LossKind::SoftmaxCrossEntropy ? softmaxCrossEntropyLoss(e, pred, labels)
                                                        : meanSquaredErrorLoss(e, pred, labels);
  if (!e.ok())
    return e.error();
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> grads, gradients(*sg, loss, paramValues));
  if (o.clipNorm > 0)
    grads = clipByGlobalNorm(e, grads, o.clipNorm);
  int ns = stateCount(o.optimizer);
  std::vector<Value *> outputs = {loss}, newParams, newState;
  std::vector<Tensor> stateInit;
  for (size_t i = 0; i < paramValues.size(); ++i) {
    std::vector<Value *> st;
    for (int k = 0; k < ns; ++k) {
      st.push_back(sg->addInput(fmt::format("{}.state{}", paramValues[i]->name(), k),
                                paramValues[i]->type()));
      stateInit.push_back(Tensor::zeros(tr->dtype_, initial[i].extents()));
    }
    std::vector<Value *> r = update(e, o, lr, step, paramValues[i], grads[i], st);
    if (!e.ok())
      return e.error();
    newParams.push_back(r[0]);
    newState.insert(newState.end(), r.begin() + 1, r.end());
  }
  for (auto [constant, update] : runningUpdates) {
    Value *v = constant->result(0);
    std::string name = v->name();
    stateInit.push_back(constant->getTensor("value"));
    sg->renameValue(v, name + ".initial");
    sg->replaceAllUsesWith(v, sg->addInput(name, v->type()));
    sg->eraseNode(constant);
    newState.push_back(update);
    tr->runningNames_.push_back(name);
  }
  outputs.insert(outputs.end(), newParams.begin(), newParams.end());
  outputs.insert(outputs.end(), newState.begin(), newState.end());
  // The next step's count, so that a device-resident step needs no count from the host.
  outputs.push_back(e.add(step, e.scalar(1, DType::I64)));
  if (!e.ok())
    return e.error();
  sg->setOutputs(outputs);
  // Resident tensors in graph-input order after x: parameters, labels/lr/step (fed per step),
  // then the optimizer state and the running statistics.
  tr->state_ = std::move(initial);
  tr->state_.insert(tr->state_.end(), stateInit.begin(), stateInit.end());
  tr->stateCount_ = tr->state_.size();

  // 4. The target's passes and one compile.
  tr->unoptimized_ = sg->clone();
  NNC_TRY(driver::optimize(*sg, o.target));
  NNC_USER_CHECK(sg->inputs().size() == 4 + tr->state_.size(),
                 "internal error: the train step has {} inputs after optimization, expected {}",
                 sg->inputs().size(), 4 + tr->state_.size());
  tr->graph_ = std::move(sg);
  NNC_ASSIGN_OR_RETURN(tr->runner_, driver::Runner::create(*tr->graph_, o.target, o.exec));
  // Compile now rather than in the first step (every input shape is static here).
  if (CpuModel *m = tr->runner_->cpuModel()) {
    std::vector<Extents> inputShapes;
    for (Value *in : tr->graph_->inputs()) {
      std::optional<Extents> e = staticExtents(in->shape());
      NNC_ASSERT(e, "train-step input {} is not static", in->type().str());
      inputShapes.push_back(*e);
    }
    NNC_ASSIGN_OR_RETURN(tr->exe_, m->executableFor(inputShapes));
  }
  // 5. On OpenCL the parameters, the optimizer state, lr and the step count live on the
  //    device: uploaded once here, each step's new values swapped in there.
  if (auto *cl = dynamic_cast<OpenCLExecutable *>(tr->exe_)) {
    size_t np = tr->paramNames_.size(), nst = tr->state_.size();
    std::vector<ResidentInput> resident;
    std::vector<Tensor> initial;
    for (size_t i = 0; i < np; ++i) { // parameters: inputs 1.., outputs 1..
      resident.push_back({1 + i, 1 + i});
      initial.push_back(tr->state_[i]);
    }
    resident.push_back({np + 2, std::nullopt}); // lr
    initial.push_back(scalarTensor(tr->dtype_, o.lr));
    resident.push_back({np + 3, 1 + nst}); // step
    initial.push_back(scalarTensor(DType::I64, 1));
    for (size_t i = np; i < nst; ++i) { // optimizer state, running statistics: inputs after step
      resident.push_back({4 + i, 1 + i});
      initial.push_back(tr->state_[i]);
    }
    NNC_TRY(cl->keepResident(resident, initial));
    tr->device_ = cl;
    tr->state_.clear(); // the device holds it now
  }
  return tr;
}

Expected<double> Trainer::step(const Tensor &inputs, const Tensor &labels) {
  NNC_USER_CHECK(inputs.type() == inputType_, "the batch is {}, the train step takes {}",
                 inputs.type().str(), inputType_.str());
  NNC_USER_CHECK(labels.type() == labelType_, "the labels are {}, the train step takes {}",
                 labels.type().str(), labelType_.str());
  if (device_) {
    // Resident inputs are null: only the batch and the labels cross.
    std::vector<Tensor> in(graph_->inputs().size());
    in[0] = inputs;
    in[paramNames_.size() + 1] = labels;
    NNC_ASSIGN_OR_RETURN(std::vector<Tensor> out, device_->run(in));
    ++steps_;
    return out[0].elementAsDouble(0);
  }
  size_t np = paramNames_.size();
  std::vector<Tensor> in;
  in.reserve(4 + state_.size());
  in.push_back(inputs);
  in.insert(in.end(), state_.begin(), state_.begin() + static_cast<long>(np));
  in.push_back(labels);
  in.push_back(scalarTensor(dtype_, options_.lr));
  in.push_back(scalarTensor(DType::I64, static_cast<double>(steps_ + 1)));
  in.insert(in.end(), state_.begin() + static_cast<long>(np), state_.end());
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> out, exe_ ? exe_->run(in) : runner_->run(in));
  NNC_ASSERT(out.size() == 2 + state_.size(), "{} outputs of the train step", out.size());
  in.clear(); // drop the old state before the new one takes its place
  for (size_t i = 0; i < state_.size(); ++i)
    state_[i] = std::move(out[i + 1]);
  ++steps_;
  return out[0].elementAsDouble(0);
}

Expected<std::map<std::string, Tensor>> Trainer::parameters() const {
  std::map<std::string, Tensor> m;
  // Parameters are state 0.., the running statistics its last; on OpenCL lr and step sit
  // between the parameters and the rest in the resident list.
  size_t np = paramNames_.size(), nr = runningNames_.size();
  size_t firstRunning = stateCount_ - nr;
  auto read = [&](size_t i) -> Expected<Tensor> {
    if (!device_)
      return state_[i];
    return device_->readResident(i < np ? i : i + 2);
  };
  for (size_t i = 0; i < np; ++i) {
    NNC_ASSIGN_OR_RETURN(m[paramNames_[i]], read(i));
  }
  for (size_t j = 0; j < nr; ++j) {
    NNC_ASSIGN_OR_RETURN(m[runningNames_[j]], read(firstRunning + j));
  }
  return m;
}

} // namespace nnc
