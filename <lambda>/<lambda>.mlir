module @_lambda {
  func.func public @main(%arg0: tensor<f64>) -> tensor<f64> {
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<f64>
    %0 = stablehlo.multiply %arg0, %cst : tensor<f64>
    return %0 : tensor<f64>
  }
}
