// npu_ldq: the pipelined read path of LOAD.
//
// Row requests (VA, length, scratchpad row) are translated in order and their read bursts are
// issued back to back, with up to DEPTH bursts in flight; rows come back in request order on
// row_valid_o. A translation fault stops the queue: no later row is issued, every earlier row
// is still delivered, and err_o is raised (sticky until clear_i) so the controller reports the
// fault once the queue is idle. Architecturally this is exactly the one-row-at-a-time
// behaviour of architecture.md 1.4.
//
// Translation: a one-entry TLB (flushed with tlb_flush_i) checked in the accept cycle. A hit on
// a row within one page issues its burst in that same cycle (one row per cycle); a miss or a
// page-crossing row takes the slow path, which reads the PTE through the same in-order bus
// (after the bursts already in flight).
module npu_ldq
  import npu_config_pkg::*;
#(
  parameter int unsigned ROW_BYTES = 64,
  parameter int unsigned BEAT_BYTES = 16,
  parameter int unsigned DEPTH = 32
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  logic                      hold_i,
  input  logic                      clear_i,
  input  logic                      tlb_flush_i,
  input  logic [31:0]               pt_base_i,
  input  logic [32:0]               dram_bytes_i,

  input  logic                      req_valid_i,
  output logic                      req_ready_o,
  input  logic [31:0]               req_va_i,
  input  logic [7:0]                req_len_i,
  input  logic [31:0]               req_row_i,

  output logic                      row_valid_o,
  output logic [ROW_BYTES*8-1:0]    row_data_o,
  output logic [31:0]               row_idx_o,
  output logic [7:0]                row_len_o,

  output logic                      idle_o,
  output logic                      err_o,
  output logic [7:0]                err_code_o,
  output logic [31:0]               err_addr_o,
  output logic                      stall_o,

  output logic                      mem_req_valid_o,
  input  logic                      mem_req_ready_i,
  output logic [31:0]               mem_req_addr_o,
  output logic [7:0]                mem_req_beats_o,
  input  logic                      mem_rsp_valid_i,
  input  logic [BEAT_BYTES*8-1:0]   mem_rsp_data_i
);
  localparam int unsigned BB = BEAT_BYTES * 8;
  localparam int unsigned RB = ROW_BYTES * 8;
  localparam int unsigned MAXBEATS = ROW_BYTES / BEAT_BYTES + 1;
  localparam int unsigned BUFB = MAXBEATS * BB;
  localparam int unsigned OFFW = $clog2(BEAT_BYTES);
  localparam int unsigned BCW = $clog2(MAXBEATS + 1);
  localparam int unsigned PW = $clog2(DEPTH);

  // In-flight burst descriptors, in bus order.
  typedef struct packed {
    logic            pte;       // PTE read (1 beat) rather than row data
    logic [BCW-1:0]  beats;
    logic [OFFW-1:0] off;       // byte offset of the first byte in the first beat
    logic [8:0]      len;       // bytes of this piece
    logic [8:0]      poff;      // offset of this piece in the row
    logic            last;      // last piece of the row
    logic [31:0]     row;       // scratchpad row (data) / PTE word index (pte)
    logic [7:0]      row_len;   // row length in bytes
  } desc_t;

  desc_t           fifo_q [DEPTH];
  logic [PW-1:0]   wr_ptr_q, rd_ptr_q;
  logic [PW:0]     count_q;

  // ---------------------------------------------------------------- translate/issue stage
  typedef enum logic [2:0] { T_IDLE, T_XL, T_PTE_WAIT, T_CHK, T_ISS } tstate_e;
  tstate_e t_st_q;
  logic        err_q;
  logic [31:0] va_q, va1_q, row_q;
  logic [7:0]  rlen_q;
  logic [8:0]  len0_q, len1_q;
  logic        two_q, piece_q;
  logic [31:0] pa0_q, pa1_q;
  logic [31:0] pte_q;
  logic        tlb_v_q;
  logic [15:0] tlb_page_q;
  logic [31:0] tlb_pte_q;

  // R stage -> T stage: the PTE the slow path is waiting for.
  logic        pte_valid;
  logic [31:0] pte_value;

  logic bus_busy;   // a request is raised and not yet accepted
  assign bus_busy = mem_req_valid_o && !mem_req_ready_i;

  // Fast path: a row within one page whose page hits the TLB and passes the checks.
  logic        fast_cross, fast_hit;
  logic [31:0] fast_pa;
  assign fast_cross = (17'(req_va_i[15:0]) + 17'(req_len_i)) > 17'h10000;
  assign fast_hit = tlb_v_q && tlb_page_q == req_va_i[31:16] && !tlb_flush_i;
  assign fast_pa = {tlb_pte_q[31:16], req_va_i[15:0]};

  assign req_ready_o = (t_st_q == T_IDLE) && !err_q && !bus_busy &&
                       (count_q <= (PW+1)'(DEPTH - 2));
  assign idle_o = (t_st_q == T_IDLE) && (count_q == 0) && !mem_req_valid_o;
  assign err_o = err_q;
  assign stall_o = (count_q != 0);

  function automatic logic [BCW-1:0] beats_for(input logic [OFFW-1:0] off, input logic [8:0] len);
    logic [9:0] span;
    span = 10'(off) + 10'(len) + 10'(BEAT_BYTES - 1);
    return BCW'(span >> OFFW);
  endfunction

  function automatic logic out_of_dram(input logic [33:0] pa, input logic [8:0] len,
                                       input logic [32:0] size);
    return (pa + 34'(len)) > 34'(size);
  endfunction

  // ---------------------------------------------------------------- receive stage state
  logic [BCW-1:0]  r_beat_q;
  logic [BUFB-1:0] r_buf_q;
  logic [RB-1:0]   r_row_q;

  always_ff @(posedge clk_i) begin
    if (!rst_ni || clear_i) begin
      t_st_q <= T_IDLE;
      err_q <= 1'b0;
      err_code_o <= ERR_NONE;
      err_addr_o <= '0;
      tlb_v_q <= 1'b0;
      mem_req_valid_o <= 1'b0;
      mem_req_addr_o <= '0;
      mem_req_beats_o <= '0;
      wr_ptr_q <= '0;
      rd_ptr_q <= '0;
      count_q <= '0;
      r_beat_q <= '0;
      r_row_q <= '0;
      row_valid_o <= 1'b0;
    end else if (!hold_i) begin
      logic push, pop;
      desc_t nd;
      push = 1'b0;
      pop = 1'b0;
      nd = '0;
      row_valid_o <= 1'b0;
      if (tlb_flush_i) tlb_v_q <= 1'b0;
      if (mem_req_valid_o && mem_req_ready_i) mem_req_valid_o <= 1'b0;

      // ------------------------------------------------------------ receive
      // Beats for other units (npu_ifu) pass by while nothing of ours is in flight.
      if (mem_rsp_valid_i && count_q != 0) begin
        desc_t d;
        logic [BUFB-1:0] full;
        d = fifo_q[rd_ptr_q];
        full = r_buf_q | (BUFB'(mem_rsp_data_i) << (32'(r_beat_q) * BB));
        r_buf_q <= full;
        if (r_beat_q + 1'b1 == d.beats) begin
          r_beat_q <= '0;
          r_buf_q <= '0;
          pop = 1'b1;
          if (d.pte) begin
            tlb_v_q <= 1'b1;
            tlb_page_q <= piece_q ? va1_q[31:16] : va_q[31:16];
            tlb_pte_q <= mem_rsp_data_i[d.row[OFFW-3:0]*32 +: 32];
          end else begin
            logic [RB-1:0] piece, mask, merged;
            mask = ~({RB{1'b1}} << {d.len, 3'b000});
            piece = RB'(full >> {d.off, 3'b000}) & mask;
            merged = r_row_q | (piece << {d.poff, 3'b000});
            if (d.last) begin
              row_valid_o <= 1'b1;
              row_data_o <= merged;
              row_idx_o <= d.row;
              row_len_o <= d.row_len;
              r_row_q <= '0;
            end else begin
              r_row_q <= merged;
            end
          end
        end else begin
          r_beat_q <= r_beat_q + 1'b1;
        end
      end

      // ------------------------------------------------------------ translate / issue
      unique case (t_st_q)
        T_IDLE: begin
          if (req_valid_i && req_ready_o) begin
            va_q <= req_va_i;
            row_q <= req_row_i;
            rlen_q <= req_len_i;
            piece_q <= 1'b0;
            if (fast_cross) begin
              two_q <= 1'b1;
              len0_q <= 9'(17'h10000 - 17'(req_va_i[15:0]));
              len1_q <= 9'(17'(req_len_i) - (17'h10000 - 17'(req_va_i[15:0])));
              va1_q <= {req_va_i[31:16] + 16'd1, 16'h0000};
              t_st_q <= T_XL;
            end else begin
              two_q <= 1'b0;
              len0_q <= 9'(req_len_i);
              if (!fast_hit) begin
                t_st_q <= T_XL;
              end else if (!tlb_pte_q[0]) begin
                err_q <= 1'b1;
                err_code_o <= ERR_PAGE_FAULT;
                err_addr_o <= req_va_i;
              end else if (out_of_dram({2'b00, fast_pa}, 9'(req_len_i), dram_bytes_i)) begin
                err_q <= 1'b1;
                err_code_o <= ERR_BUS_ERROR;
                err_addr_o <= fast_pa;
              end else begin
                // Issue the row's burst now.
                mem_req_valid_o <= 1'b1;
                mem_req_addr_o <= {fast_pa[31:OFFW], OFFW'(0)};
                mem_req_beats_o <= 8'(beats_for(fast_pa[OFFW-1:0], 9'(req_len_i)));
                push = 1'b1;
                nd.pte = 1'b0;
                nd.beats = beats_for(fast_pa[OFFW-1:0], 9'(req_len_i));
                nd.off = fast_pa[OFFW-1:0];
                nd.len = 9'(req_len_i);
                nd.poff = '0;
                nd.last = 1'b1;
                nd.row = req_row_i;
                nd.row_len = req_len_i;
              end
            end
          end
        end

        T_XL: begin
          logic [15:0] cpage;
          cpage = piece_q ? va1_q[31:16] : va_q[31:16];
          if (!bus_busy) begin
            if (tlb_v_q && tlb_page_q == cpage) begin
              pte_q <= tlb_pte_q;
              t_st_q <= T_CHK;
            end else begin
              logic [33:0] pa;
              pa = {2'b00, pt_base_i} + {16'h0, cpage, 2'b00};
              if (out_of_dram(pa, 9'd4, dram_bytes_i)) begin
                err_q <= 1'b1;
                err_code_o <= ERR_BUS_ERROR;
                err_addr_o <= pa[31:0];
                t_st_q <= T_IDLE;
              end else if (count_q != (PW+1)'(DEPTH)) begin
                mem_req_valid_o <= 1'b1;
                mem_req_addr_o <= {pa[31:OFFW], OFFW'(0)};
                mem_req_beats_o <= 8'd1;
                push = 1'b1;
                nd.pte = 1'b1;
                nd.beats = BCW'(1);
                nd.row = 32'(pa[OFFW-1:2]);
                t_st_q <= T_PTE_WAIT;
              end
            end
          end
        end

        T_PTE_WAIT: begin
          if (pte_valid) begin
            pte_q <= pte_value;
            t_st_q <= T_CHK;
          end
        end

        T_CHK: begin
          logic [31:0] cva, pa;
          logic [8:0]  clen;
          cva = piece_q ? va1_q : va_q;
          clen = piece_q ? len1_q : len0_q;
          pa = {pte_q[31:16], cva[15:0]};
          if (!pte_q[0]) begin
            err_q <= 1'b1;
            err_code_o <= ERR_PAGE_FAULT;
            err_addr_o <= cva;
            t_st_q <= T_IDLE;
          end else if (out_of_dram({2'b00, pa}, clen, dram_bytes_i)) begin
            err_q <= 1'b1;
            err_code_o <= ERR_BUS_ERROR;
            err_addr_o <= pa;
            t_st_q <= T_IDLE;
          end else begin
            if (piece_q) pa1_q <= pa; else pa0_q <= pa;
            if (!piece_q && two_q) begin
              piece_q <= 1'b1;
              t_st_q <= T_XL;
            end else begin
              piece_q <= 1'b0;
              t_st_q <= T_ISS;
            end
          end
        end

        T_ISS: begin
          // Issue the row's pieces (one request per cycle), then accept the next row.
          if (!bus_busy && count_q != (PW+1)'(DEPTH)) begin
            logic [31:0] cpa;
            logic [8:0]  clen;
            logic        lastp;
            cpa = piece_q ? pa1_q : pa0_q;
            clen = piece_q ? len1_q : len0_q;
            lastp = piece_q || !two_q;
            mem_req_valid_o <= 1'b1;
            mem_req_addr_o <= {cpa[31:OFFW], OFFW'(0)};
            mem_req_beats_o <= 8'(beats_for(cpa[OFFW-1:0], clen));
            push = 1'b1;
            nd.pte = 1'b0;
            nd.beats = beats_for(cpa[OFFW-1:0], clen);
            nd.off = cpa[OFFW-1:0];
            nd.len = clen;
            nd.poff = piece_q ? len0_q : 9'd0;
            nd.last = lastp;
            nd.row = row_q;
            nd.row_len = rlen_q;
            if (lastp) begin
              piece_q <= 1'b0;
              t_st_q <= T_IDLE;
            end else begin
              piece_q <= 1'b1;
            end
          end
        end

        default: t_st_q <= T_IDLE;
      endcase

      if (push) begin
        fifo_q[wr_ptr_q] <= nd;
        wr_ptr_q <= wr_ptr_q + 1'b1;
      end
      if (pop) rd_ptr_q <= rd_ptr_q + 1'b1;
      count_q <= count_q + (PW+1)'(push) - (PW+1)'(pop);
    end
  end

  // The PTE read completes in the receive stage; hand the word to the translate stage.
  logic            head_pte;
  logic [OFFW-3:0] head_word;
  assign head_pte = fifo_q[rd_ptr_q].pte;
  assign head_word = fifo_q[rd_ptr_q].row[OFFW-3:0];
  assign pte_valid = mem_rsp_valid_i && head_pte && (count_q != 0);
  assign pte_value = mem_rsp_data_i[head_word*32 +: 32];
endmodule
