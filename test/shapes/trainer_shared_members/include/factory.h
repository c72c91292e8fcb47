#ifndef SURFACE_FIT_FACTORY_H
#define SURFACE_FIT_FACTORY_H

#include "config.h"
#include "trainer.h"

namespace surface {

// Builds the model, moves it to the best device and creates the optimizer the
// configuration names.
Trainer make_trainer(const Config& config);

}  // namespace surface

#endif
