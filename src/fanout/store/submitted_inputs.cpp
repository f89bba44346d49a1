// Reading a job's submitted mini-batches back. See submitted_inputs.hpp.
#include "fanout/store/submitted_inputs.hpp"

#include "fanout/store/db.hpp"
#include "fanout/store/detail/encoding.hpp"
#include "fanout/store/detail/read_only.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

std::vector<SubmittedInput> read_submitted_inputs(const std::string& path, std::uint64_t job_id) {
  auto db = detail::open_read_only_current(path);
  Statement st(*db,
               "SELECT minibatch_id, descriptor, detail FROM minibatch_inputs WHERE job_id = ?1 "
               "ORDER BY minibatch_id");
  st.bind(1, job_id);
  std::vector<SubmittedInput> out;
  std::string made_up;
  while (st.step()) {
    SubmittedInput in;
    in.id = st.column_uint64(0);
    if (!detail::unpack_from(st.column_blob(1), in.items)) {
      throw Failure(ErrorCode::InvalidArgument, path + ": job " + std::to_string(job_id) +
                                                    ": the stored items of mini-batch " +
                                                    std::to_string(in.id) + " cannot be decoded");
    }
    in.detail = st.column_text(2);
    // A detail the store made up (the client sent none) is not the client's.
    made_up.clear();
    detail::append_default_detail(made_up, in.items);
    if (in.detail == made_up) in.detail.clear();
    out.push_back(std::move(in));
  }
  return out;
}

}  // namespace fanout::store
