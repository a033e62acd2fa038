"""Seconds per gradient step of GPyTorch's deep GP (run by benchmarks/dgp_step.py in the peers'
venv).

Usage: python gpytorch_dgp.py DATA.npz CONFIGS_JSON  -> prints one JSON object on its last line.
Each config: {"layers": L, "batch": B, "dtype": "float64" | "float32"}. The model is the DeepGP of
GPyTorch's documentation: inner layers of width D with a linear mean, one kernel and one set of
M = 100 inducing inputs per output (batched), whitened Cholesky variational distributions,
ScaleKernel(RBF with ARD); one sample (num_likelihood_samples(1)), Adam, 2 threads.
"""

import json
import sys
import time

import gpytorch
import numpy as np
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.means import ConstantMean, LinearMean
from gpytorch.models.deep_gps import DeepGP, DeepGPLayer
from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy


class Layer(DeepGPLayer):
    def __init__(self, input_dims, output_dims, num_inducing, linear_mean):
        batch = torch.Size([]) if output_dims is None else torch.Size([output_dims])
        inducing = torch.randn(*batch, num_inducing, input_dims)
        dist = CholeskyVariationalDistribution(num_inducing, batch_shape=batch)
        strategy = VariationalStrategy(self, inducing, dist, learn_inducing_locations=True)
        super().__init__(strategy, input_dims, output_dims)
        self.mean_module = (
            LinearMean(input_dims) if linear_mean else ConstantMean(batch_shape=batch)
        )
        self.covar_module = ScaleKernel(
            RBFKernel(batch_shape=batch, ard_num_dims=input_dims), batch_shape=batch
        )

    def forward(self, x):
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


class Model(DeepGP):
    def __init__(self, dims, layers, num_inducing=100):
        super().__init__()
        self.inner = torch.nn.ModuleList(
            [Layer(dims, dims, num_inducing, True) for _ in range(layers - 1)]
        )
        self.last = Layer(dims, None, num_inducing, False)
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood()

    def forward(self, x):
        for layer in self.inner:
            x = layer(x)
        return self.last(x)


def step_seconds(x, y, layers, batch, dtype, repeats):
    torch.manual_seed(0)
    x = torch.as_tensor(x[:batch], dtype=dtype)
    y = torch.as_tensor(y[:batch, 0], dtype=dtype)
    model = Model(x.shape[1], layers).to(dtype)
    mll = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(model.likelihood, model, batch)
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        with gpytorch.settings.num_likelihood_samples(1):
            loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    return float(np.median(times))


def main():
    torch.set_num_threads(2)
    data = np.load(sys.argv[1])
    out = []
    for c in json.loads(sys.argv[2]):
        s = step_seconds(
            data["x"],
            data["y"],
            c["layers"],
            c["batch"],
            getattr(torch, c["dtype"]),
            c.get("repeats", 10),
        )
        out.append(dict(c, seconds=s))
    print(
        json.dumps(
            {
                "library": "gpytorch",
                "version": gpytorch.__version__,
                "torch": torch.__version__,
                "results": out,
            }
        )
    )


if __name__ == "__main__":
    main()
