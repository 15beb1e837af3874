// The supervisor's segment and its published copy: creation, attach, refusal of mismatches
// with the field named, liveness by the copy's lock (never by its header), the instance's
// lock that no removal of a name loses, stale-copy detection and removal, the live segment
// left alone, a segment no participant can write or resize, and a copy that another
// process truncates or unnames.
#include <catch2/catch.hpp>

#include "ipc/ofd_lock.hpp"
#include "ipc/unique_fd.hpp"
#include "shared/segment_layout.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/deliberate_fault.hpp"
#include "tests/support/test_instance.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace comfy;
using Catch::Matchers::Contains;
using comfy::test::ChildProcess;

namespace {

// The creator's published copy, which attachers read, as a view.
SegmentView published_view(ipc::SharedSegment& segment) {
    return SegmentView(segment.published()->base(), view_of(segment).capacities());
}

ipc::SegmentHeader& published_header(ipc::SharedSegment& segment) {
    return *reinterpret_cast<ipc::SegmentHeader*>(segment.published()->base());
}

// Truncates the file under `name` to `bytes`, as any process of the user can.
void truncate_by_name(const std::string& name, off_t bytes) {
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    REQUIRE(fd >= 0);
    CHECK(::ftruncate(fd, bytes) == 0);
    ::close(fd);
}

bool exists(const std::string& name) {
    struct stat st {};
    return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("a created segment can be attached and shows its header and layout") {
    const auto instance = test::test_instance("seg");
    const Capacities caps{8, 32, 16};
    auto created = create_segment(instance, caps);
    CHECK(created.is_creator());
    CHECK(created.name() == ipc::segment_name(instance));
    CHECK(created.name().find("comfy-sv-" + std::to_string(::geteuid()) + "-" + instance) == 1);

    auto attached = attach_segment(instance);
    CHECK_FALSE(attached.is_creator());
    CHECK(attached.header().magic == ipc::kSegmentMagic);
    CHECK(attached.header().layout_version == kLayoutVersion);
    CHECK(attached.header().creator_pid == ::getpid());
    CHECK(attached.header().instance_epoch == created.header().instance_epoch);
    CHECK(attached.header().total_bytes == attached.size());
    const auto view = view_of(attached);
    CHECK(view.capacities().participants == 8);
    CHECK(view.capacities().ledger_entries == 32);
    CHECK(view.capacities().ring_slots == 16);

    // What the creator writes into its published copy is what the attacher reads.
    ipc::SeqlockWriter<ParticipantRecord> writer(published_view(created).participant(3).record);
    ParticipantRecord record{};
    record.pid = 77;
    writer.write(record);
    ParticipantRecord read{};
    REQUIRE(view.participant(3).record.read(read) == ipc::SeqlockRead::ok);
    CHECK(read.pid == 77);
}

TEST_CASE("an attacher maps the segment read-only: a write faults in the writer alone") {
    const auto instance = test::test_instance("seg");
    auto created = create_segment(instance, Capacities{4, 8, 4});
    for (const std::size_t offset : {std::size_t{0}, std::size_t{4096}, created.size() - 8}) {
        ChildProcess writer([&] {
            auto attached = attach_segment(instance);
            test::write_expecting_fault(attached.base() + offset);
            return 0;
        });
        CHECK(writer.wait() == 128 + SIGSEGV);
    }
    CHECK(created.header().magic == ipc::kSegmentMagic);
    CHECK_NOTHROW(attach_segment(instance));
}

TEST_CASE("the descriptor a creator hands down is read-only too") {
    const auto instance = test::test_instance("seg");
    auto created = create_segment(instance, Capacities{4, 8, 4});
    const int fd = created.read_only_fd();
    REQUIRE(fd >= 0);
    CHECK((::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK(::mmap(nullptr, created.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    auto adopted = adopt_segment(::dup(fd));
    CHECK(adopted.header().instance_epoch == created.header().instance_epoch);
    CHECK(view_of(adopted).capacities().participants == 4);
}

TEST_CASE("the segment a participant is handed cannot be written, resized or mapped writable, even reopened") {
    const auto instance = test::test_instance("seg");
    auto created = create_segment(instance, Capacities{4, 8, 4});
    const std::string path = "/proc/self/fd/" + std::to_string(created.read_only_fd());
    // A hostile participant: its inherited read-only descriptor, reopened writable.
    ChildProcess participant([&] {
        const int writable = ::open(path.c_str(), O_RDWR);
        if (writable < 0) return 0;
        if (::ftruncate(writable, 0) == 0) return 1;
        if (::ftruncate(writable, static_cast<off_t>(2 * created.size())) == 0) return 2;
        if (::mmap(nullptr, created.size(), PROT_READ | PROT_WRITE, MAP_SHARED, writable, 0) != MAP_FAILED) return 3;
        if (::pwrite(writable, "x", 1, 0) == 1) return 4;
        return 0;
    });
    CHECK(participant.wait() == 0);
    CHECK(created.header().magic == ipc::kSegmentMagic);
    CHECK_NOTHROW(attach_segment(instance));
}

TEST_CASE("the segment is created with mode 0600 whatever the umask") {
    const auto instance = test::test_instance("seg");
    const mode_t old = ::umask(0);
    auto segment = create_segment(instance, Capacities{2, 4, 4});
    ::umask(old);
    struct stat st {};
    REQUIRE(::stat(("/dev/shm" + segment.name()).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == ::geteuid());
}

TEST_CASE("the default capacities fit 64 participants and 4096 ledger entries") {
    const Capacities defaults;
    CHECK(defaults.participants == 64);
    CHECK(defaults.ledger_entries == 4096);
    CHECK(defaults.validate().empty());
    auto segment = create_segment(test::test_instance("seg"), defaults);
    CHECK(segment.size() == RegionMap::compute(defaults).total_bytes);
}

TEST_CASE("impossible capacities are refused with the value named") {
    CHECK_THAT((Capacities{0, 4, 4}.validate()), Contains("participants is 0"));
    CHECK_THAT((Capacities{4, 0, 4}.validate()), Contains("ledger_entries is 0"));
    CHECK_THAT((Capacities{4, 4, 6}.validate()), Contains("ring_slots is 6"));
    CHECK_THROWS_WITH(create_segment(test::test_instance("seg"), Capacities{4, 4, 3}), Contains("ring_slots is 3"));
}

TEST_CASE("attach refuses a mismatch and names the field and both values") {
    const auto instance = test::test_instance("seg");
    auto segment = create_segment(instance, Capacities{2, 4, 4});
    auto& header = published_header(segment);

    SECTION("magic") {
        header.magic = 0x1234;
        CHECK_THROWS_WITH(attach_segment(instance), Contains("magic is 4660, expected"));
    }
    SECTION("layout version") {
        header.layout_version = 99;
        CHECK_THROWS_WITH(attach_segment(instance),
                          Contains("layout_version is 99, expected " + std::to_string(kLayoutVersion)));
    }
    SECTION("total size") {
        header.total_bytes += 64;
        CHECK_THROWS_WITH(attach_segment(instance), Contains("total_bytes is"));
    }
    SECTION("layout header") {
        auto* layout = reinterpret_cast<LayoutHeader*>(segment.published()->base() + 64);
        layout->ledger_offset += 64;
        CHECK_THROWS_WITH(attach_segment(instance), Contains("ledger_offset is"));
    }
}

TEST_CASE("attach to a missing instance says so") {
    CHECK_THROWS_WITH(attach_segment(test::test_instance("absent")), Contains("is the supervisor running"));
}

TEST_CASE("a segment whose creator died is detected as stale and removed") {
    const auto instance = test::test_instance("seg");
    const auto name = ipc::segment_name(instance);
    ChildProcess creator([&] {
        auto segment = create_segment(instance, Capacities{2, 4, 4});
        ::_exit(0);  // die without cleaning up, as after SIGKILL
        return 0;
    });
    REQUIRE(creator.wait() == 0);
    REQUIRE(exists(name));

    const auto inspection = ipc::inspect_segment(name);
    CHECK(inspection.state == ipc::SegmentState::stale);
    CHECK_THAT(inspection.detail, Contains("no supervisor holds it"));
    CHECK_THROWS_WITH(attach_segment(instance), Contains("stale segment"));

    SECTION("removed on request") {
        CHECK(ipc::remove_stale_segment(name));
        CHECK_FALSE(exists(name));
    }
    SECTION("replaced by the next creator") {
        auto fresh = create_segment(instance, Capacities{2, 4, 4});
        CHECK(fresh.header().creator_pid == ::getpid());
        CHECK_NOTHROW(attach_segment(instance));
    }
}

TEST_CASE("a live segment is never touched") {
    const auto instance = test::test_instance("seg");
    auto segment = create_segment(instance, Capacities{2, 4, 4});
    const auto epoch = segment.header().instance_epoch;

    CHECK(ipc::inspect_segment(segment.name()).state == ipc::SegmentState::live);
    CHECK_FALSE(ipc::remove_stale_segment(segment.name()));
    CHECK_THROWS_WITH(create_segment(instance, Capacities{2, 4, 4}), Contains("in use by a live supervisor"));
    // Also from another process.
    ChildProcess other([&] {
        try {
            create_segment(instance, Capacities{2, 4, 4});
        } catch (const ipc::SegmentError&) {
            return 0;
        }
        return 1;
    });
    CHECK(other.wait() == 0);
    CHECK(attach_segment(instance).header().instance_epoch == epoch);
}

TEST_CASE("an instance stays taken while its creator lives, even after its name is removed") {
    const auto instance = test::test_instance("seg");
    const auto name = ipc::segment_name(instance);
    {
        auto segment = create_segment(instance, Capacities{2, 4, 4});
        // Any process of the user can remove the name; the lock on the file it named is then
        // a lock nobody asks about.
        REQUIRE(::shm_unlink(name.c_str()) == 0);
        CHECK_THROWS_WITH(create_segment(instance, Capacities{2, 4, 4}),
                          Contains("in use by a live supervisor (it holds the instance's lock @" + name.substr(1)));
        // Also from another process; and the refused creator made nothing under the name.
        ChildProcess other([&] {
            try {
                create_segment(instance, Capacities{2, 4, 4});
            } catch (const ipc::InstanceTaken&) {
                return 0;
            }
            return 1;
        });
        CHECK(other.wait() == 0);
        CHECK(ipc::inspect_segment(name).state == ipc::SegmentState::absent);
    }
    // The creator gone, the instance is free at once.
    CHECK_NOTHROW(create_segment(instance, Capacities{2, 4, 4}));
}

TEST_CASE("whether a segment is live is its copy's lock, whatever its header names") {
    const auto instance = test::test_instance("seg");
    const auto name = ipc::segment_name(instance);
    SECTION("a live creator's copy whose header names a dead pid stays live") {
        auto segment = create_segment(instance, Capacities{2, 4, 4});
        ChildProcess gone([] { return 0; });
        REQUIRE(gone.wait() == 0);
        published_header(segment).creator_pid = gone.pid();
        published_header(segment).creator_start_time += 1;
        CHECK(ipc::inspect_segment(name).state == ipc::SegmentState::live);
        CHECK_FALSE(ipc::remove_stale_segment(name));
        CHECK_THROWS_AS(create_segment(instance, Capacities{2, 4, 4}), ipc::InstanceTaken);
        CHECK_NOTHROW(attach_segment(instance));
    }
    SECTION("a dead creator's copy whose header names a live pid is stale") {
        ChildProcess creator([&] {
            auto segment = create_segment(instance, Capacities{2, 4, 4});
            published_header(segment).creator_pid = ::getppid();
            ::_exit(0);
            return 0;
        });
        REQUIRE(creator.wait() == 0);
        CHECK(ipc::inspect_segment(name).state == ipc::SegmentState::stale);
        CHECK(ipc::remove_stale_segment(name));
    }
}

TEST_CASE("a published copy truncated under its creator is found, republished, and never faults anyone") {
    const auto instance = test::test_instance("seg");
    const Capacities caps{4, 8, 4};
    auto segment = create_segment(instance, caps);
    ipc::PublishedCopy& copy = *segment.published();
    auto reader = attach_segment(instance);
    const auto reader_view = view_of(reader);
    CHECK_FALSE(copy.damage());

    truncate_by_name(segment.name(), 0);
    // The creator writes on, into the segment and its copy, as the supervisor does: no SIGBUS.
    ParticipantRecord record{};
    record.pid = 41;
    ipc::SeqlockWriter<ParticipantRecord>(view_of(segment).participant(1).record).write(record);
    ipc::SeqlockWriter<ParticipantRecord>(published_view(segment).participant(1).record).write(record);
    // A reader of the copy reads zeros where the pages went, and knows it.
    ParticipantRecord seen{};
    CHECK(reader_view.participant(1).record.read(seen) == ipc::SeqlockRead::ok);
    CHECK(seen.pid == 0);
    CHECK(reader.outdated());
    REQUIRE(copy.damage());
    CHECK_THAT(*copy.damage(), Contains("to 0 bytes"));

    copy.republish(segment.base());
    CHECK_FALSE(copy.damage());
    auto again = attach_segment(instance);
    CHECK_FALSE(again.outdated());
    CHECK(again.header().instance_epoch == segment.header().instance_epoch);
    REQUIRE(view_of(again).participant(1).record.read(seen) == ipc::SeqlockRead::ok);
    CHECK(seen.pid == 41);
    // Later writes reach the new copy.
    record.pid = 42;
    ipc::SeqlockWriter<ParticipantRecord>(published_view(segment).participant(2).record).write(record);
    REQUIRE(view_of(again).participant(2).record.read(seen) == ipc::SeqlockRead::ok);
    CHECK(seen.pid == 42);
    CHECK(ipc::inspect_segment(segment.name()).state == ipc::SegmentState::live);
}

TEST_CASE("a published copy that lost its name is named again, and a name another holds is left to it") {
    const auto instance = test::test_instance("seg");
    auto segment = create_segment(instance, Capacities{2, 4, 4});
    ipc::PublishedCopy& copy = *segment.published();
    const auto reader = attach_segment(instance);
    REQUIRE(::shm_unlink(segment.name().c_str()) == 0);
    REQUIRE(copy.damage());
    CHECK_THAT(*copy.damage(), Contains("lost its name"));
    CHECK(reader.outdated());
    copy.republish(segment.base());
    CHECK_FALSE(copy.damage());
    CHECK(reader.outdated());  // it reads the copy that lost its name
    CHECK(attach_segment(instance).header().instance_epoch == segment.header().instance_epoch);

    // Another process took the name while it was gone and holds its file's lock (no second
    // creator can while this one lives, but any process can lock a file): never replaced.
    REQUIRE(::shm_unlink(segment.name().c_str()) == 0);
    const ipc::UniqueFd other(::shm_open(segment.name().c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    REQUIRE(other);
    REQUIRE(ipc::take_file_lock(other.get()));
    CHECK_THAT(*copy.damage(), Contains("lost its name to another file"));
    CHECK_THROWS_WITH(copy.republish(segment.base()), Contains("another live process holds a file under its name"));
    struct stat theirs {}, named {};
    CHECK(::fstat(other.get(), &theirs) == 0);
    CHECK(::stat(ipc::shm_path(segment.name()).c_str(), &named) == 0);
    CHECK(named.st_ino == theirs.st_ino);
    ::shm_unlink(segment.name().c_str());
}

TEST_CASE("a foreign file under our name is refused and left alone") {
    const auto instance = test::test_instance("seg");
    const auto name = ipc::segment_name(instance);
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 4096) == 0);
    ::close(fd);

    CHECK(ipc::inspect_segment(name).state == ipc::SegmentState::foreign);
    CHECK_FALSE(ipc::remove_stale_segment(name));
    CHECK_THROWS_WITH(create_segment(instance, Capacities{2, 4, 4}), Contains("not a comfy-supervisor segment"));
    CHECK(exists(name));
    ::shm_unlink(name.c_str());
}

TEST_CASE("the creator removes its segment when it is done") {
    const auto instance = test::test_instance("seg");
    std::string name;
    {
        auto segment = create_segment(instance, Capacities{2, 4, 4});
        name = segment.name();
        REQUIRE(exists(name));
    }
    CHECK_FALSE(exists(name));
}

TEST_CASE("instance names are checked") {
    CHECK_THROWS_WITH(ipc::segment_name(""), Contains("1 to 48 characters"));
    CHECK_THROWS_WITH(ipc::segment_name(std::string(49, 'a')), Contains("1 to 48 characters"));
    CHECK_THROWS_WITH(ipc::segment_name("../etc"), Contains("only letters, digits"));
    CHECK_THROWS_WITH(ipc::segment_name("a b"), Contains("only letters, digits"));
    CHECK_NOTHROW(ipc::segment_name("prod_gpu-0"));
}
