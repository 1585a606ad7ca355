import numpy as np

import sluice as paddle
from sluice.static import Program, program_guard, Executor
from sluice.optimizer import Adam

paddle.enable_static()

#组网过程
main_program = Program()
startup_program = Program()
with program_guard(main_program, startup_program):
    x = paddle.static.data(shape = [16, 16], name = 'x')
    label = paddle.static.data(shape=[16, 1], name = 'label')
    out = paddle.nn.Linear(in_features=16, out_features=1)(x) 
    loss = paddle.nn.MSELoss()(out, label)
    optimizer = Adam()
    optimizer.minimize(loss)

#执行过程
place = paddle.CUDAPlace(0) if paddle.is_compiled_with_cuda() else paddle.CPUPlace()
exe = Executor(place)
exe.run(startup_program)

ret = exe.run(main_program,
            feed={'x': np.ones((16, 16), np.float32),'label': np.ones((16, 1), np.float32)},
            fetch_list=[loss])
